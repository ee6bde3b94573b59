/**
 * True only when A and B are the same type (readonly and optional modifiers
 * included): `const _: Same<z.output<typeof schema>, Model> = true` keeps a
 * schema and the interface it validates from drifting apart.
 */
export type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
