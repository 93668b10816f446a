import type { KeyTemplate } from '../keys/key-template';
import type { ParamBinding } from '../keys/param-names';

/** What a route key is planned from: the part of `LockedSpec`, which imports route-key-plan.ts. */
export interface RouteKeySpec {
  /** `Class.method`, for messages. */
  readonly where: string;
  readonly template?: KeyTemplate;
  /** `@Locked([...])`: one spec per key template. */
  readonly members?: readonly RouteKeySpec[];
  /** Parameter names → argument positions; `undefined` when the source could not be read. */
  readonly params?: ReadonlyMap<string, ParamBinding>;
  /** The class the method was declared on, and its name: where Nest keeps its parameter metadata. */
  readonly owner: object;
  readonly method: string | symbol;
}
