import type { InjectionToken } from '@nestjs/common';
import type { InstanceWrapper, NestModule as Module } from '../nest-internals';

/**
 * The provider of `token` that Nest's injector gives the providers of `module`: its own, else the
 * first one an import exports, directly or through modules it re-exports — the order and rules
 * the injector follows, so the explorer checks and binds exactly what property injection yields.
 */
export function providerSeenBy(
  module: Module,
  token: InjectionToken,
): InstanceWrapper<unknown> | undefined {
  return module.providers.get(token) ?? exportedThroughImports(module, token, new Set(), false);
}

function exportedThroughImports(
  module: Module,
  token: InjectionToken,
  visited: Set<string>,
  traversing: boolean,
): InstanceWrapper<unknown> | undefined {
  for (const imported of module.imports) {
    // Beyond the first level, only modules the importer re-exports pass their exports on.
    if (!imported || (traversing && !module.exports.has(imported.metatype))) continue;
    if (visited.has(imported.id)) continue;
    visited.add(imported.id);
    if (imported.exports.has(token) && imported.providers.has(token)) {
      return imported.providers.get(token);
    }
    const found = exportedThroughImports(imported, token, visited, true);
    if (found) return found;
  }
  return undefined;
}
