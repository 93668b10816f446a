/**
 * Apollo Server's Express 5 middleware, for the GraphQL e2e tests: `@nestjs/apollo` loads it from
 * `@as-integrations/express5`, which is not among the devDependencies. The same glue as that
 * package — Express request in, `executeHTTPGraphQLRequest`, Express response out — so the tests
 * still run a real Apollo server over HTTP. Registered as a virtual module by the GraphQL fixture.
 */
import { HeaderMap, type ApolloServer, type BaseContext } from '@apollo/server';
import type { NextFunction, Request, Response } from 'express';

interface MiddlewareOptions {
  context?: (args: { req: Request; res: Response }) => Promise<BaseContext>;
}

export function expressMiddleware(server: ApolloServer<BaseContext>, options?: MiddlewareOptions) {
  server.assertStarted('expressMiddleware()');
  const context = options?.context ?? (async () => ({}));
  return (req: Request, res: Response, next: NextFunction): void => {
    const headers = new HeaderMap();
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
    }
    const search = new URL(req.originalUrl ?? req.url, 'http://localhost').search;
    server
      .executeHTTPGraphQLRequest({
        httpGraphQLRequest: { method: req.method.toUpperCase(), headers, search, body: req.body },
        context: () => context({ req, res }),
      })
      .then(async (answer) => {
        for (const [name, value] of answer.headers) res.setHeader(name, value);
        res.statusCode = answer.status ?? 200;
        if (answer.body.kind === 'complete') {
          res.send(answer.body.string);
          return;
        }
        for await (const chunk of answer.body.asyncIterator) res.write(chunk);
        res.end();
      })
      .catch(next);
  };
}
