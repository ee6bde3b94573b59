// js-yaml ships no types (its @types package is not installed); the one call the metrics page makes.
declare module 'js-yaml' {
  const yaml: { load(text: string): unknown };
  export default yaml;
}
