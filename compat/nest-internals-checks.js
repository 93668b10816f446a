/**
 * Pins every piece of Nest's internals that `lib/nest-internals.ts` names, against the Nest
 * packages `load` resolves: each metadata key is read back from what Nest's own decorator wrote
 * (so a key that moved, or changed what it holds, fails here), each parameter type number is
 * compared with the one Nest stores, and the injector's records and the factory patch are used as
 * the explorer uses them, on a real application context.
 *
 * Plain CommonJS, so it runs unchanged in the unit suite (NestJS 11, `lib/nest-internals.spec.ts`)
 * and in `compat/nest-internals.sh`, beside NestJS 10 and 12 installs.
 *
 * @param {typeof import('../lib/nest-internals')} internals
 * @param {(name: string) => any} load  `require`, from where the Nest packages are installed
 * @returns {Promise<{ name: string, ok: boolean, detail?: string }[]>}
 */
async function checkNestInternals(internals, load) {
  load('reflect-metadata');
  const { NestMetadata: K, HttpParamType, GqlParamType } = internals;
  const common = load('@nestjs/common');
  const results = [];
  const check = async (name, run) => {
    try {
      const answer = await run();
      results.push(answer === true ? { name, ok: true } : { name, ok: false, detail: answer });
    } catch (error) {
      results.push({ name, ok: false, detail: String(error && error.stack ? error.stack : error) });
    }
  };
  const same = (read, expected) =>
    JSON.stringify(read) === JSON.stringify(expected) ||
    `read ${JSON.stringify(read)}, expected ${JSON.stringify(expected)}`;

  /** A class with one method `m`, decorated by `decorate` as TypeScript would. */
  const withMethod = (...decorators) => {
    class Target {
      m() {}
    }
    for (const decorate of decorators.reverse()) {
      const descriptor = Object.getOwnPropertyDescriptor(Target.prototype, 'm');
      const next = decorate(Target.prototype, 'm', descriptor);
      if (next) Object.defineProperty(Target.prototype, 'm', next);
    }
    return Target;
  };
  /** The `type` numbers of the route arguments Nest recorded for `m`, by parameter index. */
  const argTypes = (Target) => {
    const args = Reflect.getMetadata(K.routeArgs, Target, 'm') || {};
    return Object.fromEntries(
      Object.entries(args).map(([key, arg]) => [arg.index, key.split(':')[0]]),
    );
  };
  const param = (decorator, index) => (target, key) => void decorator(target, key, index);

  await check('interceptors: @UseInterceptors() lists them on the method, in order', () => {
    class A {}
    class B {}
    const Target = withMethod(common.UseInterceptors(A, B));
    return same(Reflect.getOwnMetadata(K.interceptors, Target.prototype.m), [A, B]);
  });

  await check('routeArgs + HttpParamType: each HTTP parameter decorator and its number', () => {
    const decorators = {
      REQUEST: common.Req(),
      RESPONSE: common.Res(),
      NEXT: common.Next(),
      BODY: common.Body(),
      QUERY: common.Query(),
      PARAM: common.Param('id'),
      HEADERS: common.Headers(),
      SESSION: common.Session(),
      FILE: common.UploadedFile(),
      FILES: common.UploadedFiles(),
      HOST: common.HostParam(),
      IP: common.Ip(),
      RAW_BODY: common.RawBody(),
    };
    const names = Object.keys(decorators);
    const Target = withMethod(...names.map((name, index) => param(decorators[name], index)));
    const read = argTypes(Target);
    const expected = Object.fromEntries(names.map((name, i) => [i, String(HttpParamType[name])]));
    const data = Reflect.getMetadata(K.routeArgs, Target, 'm')[`${HttpParamType.PARAM}:5`];
    return same(read, expected) === true ? same(data && data.data, 'id') : same(read, expected);
  });

  await check('customRouteArgs: a createParamDecorator() entry is named with it', () => {
    const User = common.createParamDecorator(() => 'user');
    const Target = withMethod(param(User(), 0));
    const keys = Object.keys(Reflect.getMetadata(K.routeArgs, Target, 'm') || {});
    return keys.some((key) => key.includes(K.customRouteArgs)) || `keys ${keys.join(', ')}`;
  });

  await check('responsePassthrough: @Res({ passthrough: true }) sets it on (class, method)', () => {
    const Target = withMethod(param(common.Res({ passthrough: true }), 0));
    return same(Reflect.getMetadata(K.responsePassthrough, Target, 'm'), true);
  });

  await check('sse: @Sse() marks the handler', () => {
    const Target = withMethod(common.Sse('events'));
    return same(Reflect.getMetadata(K.sse, Target.prototype.m), true);
  });

  await check('path + method: @Controller() and @Get() store the path and the HTTP method', () => {
    const Target = withMethod(common.Get('orders/:id'));
    common.Controller('shop')(Target);
    return same(
      [
        Reflect.getMetadata(K.path, Target),
        Reflect.getMetadata(K.path, Target.prototype.m),
        Reflect.getMetadata(K.method, Target.prototype.m),
      ],
      ['shop', 'orders/:id', common.RequestMethod.GET],
    );
  });

  await check('propertyDeps: @Inject() on a property lists { key, type }', () => {
    class Target {}
    common.Inject('TOKEN')(Target.prototype, 'dependency');
    const read = Reflect.getMetadata(K.propertyDeps, Target) || [];
    return same(
      read.map((entry) => [entry.key, entry.type]),
      [['dependency', 'TOKEN']],
    );
  });

  await check('exceptionFilters: @UseFilters() lists them on the class, in order', () => {
    class A {
      catch() {}
    }
    class B {
      catch() {}
    }
    class Target {}
    common.UseFilters(new A(), new B())(Target);
    return same(
      (Reflect.getOwnMetadata(K.exceptionFilters, Target) || []).map((f) => f.constructor.name),
      ['A', 'B'],
    );
  });

  await check(
    'filterCatch: @Catch() lists what a filter catches, nothing for every exception',
    () => {
      class Thrown extends Error {}
      class One {
        catch() {}
      }
      class All {
        catch() {}
      }
      common.Catch(Thrown, common.HttpException)(One);
      common.Catch()(All);
      return same(
        [
          (Reflect.getMetadata(K.filterCatch, One) || []).map((type) => type.name),
          Reflect.getMetadata(K.filterCatch, All),
        ],
        [['Thrown', 'HttpException'], []],
      );
    },
  );

  await check('render + redirect: @Render() and @Redirect() mark the handler', () => {
    const Rendered = withMethod(common.Render('page'));
    const Redirected = withMethod(common.Redirect('/elsewhere', 301));
    return same(
      [
        Reflect.getMetadata(K.render, Rendered.prototype.m),
        (Reflect.getMetadata(K.redirect, Redirected.prototype.m) || {}).url,
      ],
      ['page', '/elsewhere'],
    );
  });

  await check('moduleImports/Providers/Exports: @Module() lists', () => {
    class Imported {}
    class Provided {}
    class Target {}
    common.Module({ imports: [Imported], providers: [Provided], exports: [Provided] })(Target);
    return same(
      [K.moduleImports, K.moduleProviders, K.moduleExports].map((key) =>
        (Reflect.getMetadata(key, Target) || []).map((item) => item.name),
      ),
      [['Imported'], ['Provided'], ['Provided']],
    );
  });

  await check('pattern + patternHandler + payload: @MessagePattern(), @EventPattern()', () => {
    const micro = load('@nestjs/microservices');
    const Message = withMethod(micro.MessagePattern('orders.place'), param(micro.Payload(), 0));
    const Event = withMethod(micro.EventPattern('orders.placed'));
    return same(
      [
        Reflect.getMetadata(K.pattern, Message.prototype.m),
        Reflect.getMetadata(K.patternHandler, Message.prototype.m) === internals.EVENT_HANDLER_TYPE,
        Reflect.getMetadata(K.patternHandler, Event.prototype.m) === internals.EVENT_HANDLER_TYPE,
        argTypes(Message)[0],
      ],
      [['orders.place'], false, true, String(internals.PAYLOAD_PARAM_TYPE)],
    );
  });

  await check('gateway + messageMapping + payload (+ ack): @nestjs/websockets', () => {
    const ws = load('@nestjs/websockets');
    const params = [param(ws.MessageBody(), 0)];
    // `@Ack()` came with Nest 11; before it a gateway had no acknowledgement parameter to find.
    if (ws.Ack) params.push(param(ws.Ack(), 1));
    const Target = withMethod(ws.SubscribeMessage('place'), ...params);
    ws.WebSocketGateway()(Target);
    const types = argTypes(Target);
    return same(
      [
        Reflect.getMetadata(K.gateway, Target),
        Reflect.getMetadata(K.messageMapping, Target.prototype.m),
        types[0],
        ws.Ack ? types[1] : 'absent',
      ],
      [
        true,
        true,
        String(internals.PAYLOAD_PARAM_TYPE),
        ws.Ack ? String(internals.WS_ACK_PARAM_TYPE) : 'absent',
      ],
    );
  });

  await check('resolverType + resolveField + GqlParamType: @nestjs/graphql', () => {
    const gql = load('@nestjs/graphql');
    const Query = withMethod(
      gql.Query(() => String),
      param(gql.Args('id'), 0),
      param(gql.Context(), 1),
      param(gql.Info(), 2),
    );
    const Field = withMethod(
      gql.ResolveField(() => String),
      param(gql.Parent(), 0),
    );
    const Sub = withMethod(gql.Subscription(() => String));
    return same(
      [
        Reflect.getMetadata(K.resolverType, Query.prototype.m),
        Reflect.getMetadata(K.resolverType, Sub.prototype.m),
        Reflect.getMetadata(K.resolveField, Field.prototype.m),
        argTypes(Query),
        argTypes(Field)[0],
      ],
      [
        'Query',
        'Subscription',
        true,
        {
          0: String(GqlParamType.ARGS),
          1: String(GqlParamType.CONTEXT),
          2: String(GqlParamType.INFO),
        },
        String(GqlParamType.ROOT),
      ],
    );
  });

  await check('schedulerType: @Cron(), @Interval() and @Timeout() mark the method', () => {
    const schedule = load('@nestjs/schedule');
    const jobs = [schedule.Cron('* * * * * *'), schedule.Interval(1000), schedule.Timeout(1000)];
    return same(
      jobs.map((job) => Reflect.hasMetadata(K.schedulerType, withMethod(job).prototype.m)),
      [true, true, true],
    );
  });

  await check('injector records + global filters + replaceFactory: read and changed as we do', () =>
    checkInjector(internals, load, same),
  );
  await check(
    'configure(): runs once every global enhancer is set, before routes read their interceptors',
    () => checkConfigure(internals, load, same),
  );
  return results;
}

/**
 * An HTTP app (Express) whose module's `configure()` records the app's global interceptors and
 * filters (`globalRouteEnhancers`: an `APP_INTERCEPTOR`, an `APP_FILTER`, and a filter
 * `app.useGlobalFilters()` added after the app was created) and then sets a route's interceptor
 * list: a request to the route runs the interceptor set there, so the (static) route was
 * registered after `configure()`. Then, in an application context, request-scoped `APP_*`
 * providers: `globalRouteEnhancers` lists their classes (a request-scoped enhancer makes every
 * route request-scoped, which is why the HTTP app has none: its routes read their lists per
 * request, and would see one set at any time).
 */
async function checkConfigure(internals, load, same) {
  const common = load('@nestjs/common');
  const core = load('@nestjs/core');
  const { ExpressAdapter } = load('@nestjs/platform-express');
  const http = load('node:http');
  const K = internals.NestMetadata;
  const ran = [];
  const nameOf = (one) => (typeof one === 'function' ? one : one.constructor).name;
  class SetLater {
    intercept(_context, next) {
      ran.push('set in configure()');
      return next.handle();
    }
  }
  class Provided {
    intercept(_context, next) {
      return next.handle();
    }
  }
  class ProvidedFilter {
    catch() {}
  }
  class Given {
    catch() {}
  }
  class Route {
    m() {
      return 'ok';
    }
  }
  const m = Object.getOwnPropertyDescriptor(Route.prototype, 'm');
  common.Get('m')(Route.prototype, 'm', m);
  common.Controller('route')(Route);
  let seen;
  class App {
    constructor(config) {
      this.config = config;
    }
    configure() {
      const globals = internals.globalRouteEnhancers(this.config);
      seen = [globals.interceptors.map(nameOf), globals.filters.map(nameOf)];
      Reflect.defineMetadata(K.interceptors, [new SetLater()], Route.prototype.m);
    }
  }
  common.Inject(core.ApplicationConfig)(App, undefined, 0);
  common.Module({
    controllers: [Route],
    providers: [
      { provide: core.APP_INTERCEPTOR, useClass: Provided },
      { provide: core.APP_FILTER, useClass: ProvidedFilter },
    ],
  })(App);
  const app = await core.NestFactory.create(App, new ExpressAdapter(), { logger: false });
  let body;
  try {
    app.useGlobalFilters(new Given());
    await app.listen(0, '127.0.0.1');
    const { port } = app.getHttpServer().address();
    body = await new Promise((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port, path: '/route/m' }, (res) => {
          let text = '';
          res.on('data', (chunk) => (text += chunk));
          res.on('end', () => resolve(text));
        })
        .on('error', reject);
    });
  } finally {
    await app.close();
  }
  const routes = same(
    [seen, body, ran],
    [[['Provided'], ['ProvidedFilter', 'Given']], 'ok', ['set in configure()']],
  );
  if (routes !== true) return routes;

  class PerRequest {
    intercept(_context, next) {
      return next.handle();
    }
  }
  class PerRequestFilter {
    catch() {}
  }
  class Scoped {}
  common.Module({
    providers: [
      { provide: core.APP_INTERCEPTOR, useClass: PerRequest, scope: common.Scope.REQUEST },
      { provide: core.APP_FILTER, useClass: PerRequestFilter, scope: common.Scope.REQUEST },
    ],
  })(Scoped);
  const context = await core.NestFactory.createApplicationContext(Scoped, { logger: false });
  try {
    const globals = internals.globalRouteEnhancers(context.get(core.ApplicationConfig));
    return same(
      [globals.interceptors.map(nameOf), globals.filters.map(nameOf)],
      [['PerRequest'], ['PerRequestFilter']],
    );
  } finally {
    await context.close();
  }
}

/**
 * A module that imports a module exporting a provider, and a request-scoped factory provider: the
 * records the explorer reads (`providers`, `imports`, `exports`, `id`, `metatype`, `host`,
 * `inject`, `isDependencyTreeStatic()`, `isTransient`, `getStaticTransientInstances()`) answer as it
 * expects, and a factory replaced through `replaceFactory` is the one Nest calls per request.
 */
async function checkInjector(internals, load, same) {
  const common = load('@nestjs/common');
  const core = load('@nestjs/core');
  class Shared {}
  class Exporter {}
  common.Module({ providers: [Shared], exports: [Shared] })(Exporter);
  const perRequest = {
    provide: 'PER_REQUEST',
    scope: common.Scope.REQUEST,
    inject: [Shared],
    useFactory: () => 'original',
  };
  class App {}
  common.Module({ imports: [Exporter], providers: [perRequest] })(App);
  const app = await core.NestFactory.createApplicationContext(App, { logger: false });
  try {
    const modules = [...app.get(core.ModulesContainer).values()];
    const appModule = modules.find((module) => module.metatype === App);
    const exporter = modules.find((module) => module.metatype === Exporter);
    const wrapper = appModule.providers.get('PER_REQUEST');
    const imported = [...appModule.imports].find((module) => module && module.id === exporter.id);
    const read = [
      typeof appModule.id,
      imported === exporter,
      exporter.exports.has(Shared),
      exporter.providers.has(Shared),
      appModule.exports.has(Exporter),
      wrapper.host === appModule,
      Array.isArray(wrapper.inject),
      typeof wrapper.metatype,
      wrapper.isDependencyTreeStatic(),
      wrapper.isTransient,
      Array.isArray(wrapper.getStaticTransientInstances()),
    ];
    const expected = [
      'string',
      true,
      true,
      true,
      false,
      true,
      true,
      'function',
      false,
      false,
      true,
    ];
    const records = same(read, expected);
    if (records !== true) return `records: ${records}`;
    // The global filters: the array ApplicationConfig hands out is the live one.
    const config = app.get(core.ApplicationConfig);
    const first = { catch: () => undefined };
    internals.addFirstGlobalFilter(config, { catch: () => undefined }, () => false);
    internals.addFirstGlobalFilter(config, first, () => false);
    if (config.getGlobalFilters()[0] !== first) return 'addFirstGlobalFilter: not first';
    const original = wrapper.metatype;
    internals.replaceFactory(wrapper, (...args) => `patched(${String(original(...args))})`);
    const built = await app.resolve('PER_REQUEST', core.ContextIdFactory.create());
    return same(built, 'patched(original)');
  } finally {
    await app.close();
  }
}

module.exports = { checkNestInternals };
