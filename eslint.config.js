// Type-aware lint: floating promises and misused async callbacks are the bugs
// that break lease loops silently, so those rules are errors.
import js from '@eslint/js';
import ts from 'typescript';
import tseslint from 'typescript-eslint';

/**
 * Own properties only: a lookup keyed by a string that is not a literal, on an
 * object typed as a record (a string index signature), reads what the object
 * inherits too (`targets["constructor"]` is Object, `"toString" in scopes` is
 * true), so a name a user gave passes for one declared. Such lookups go
 * through `own()` / `Object.hasOwn` (shared/own.ts) or a Map. Writes, literal
 * keys (`'stage' in t` narrowing a union), numbers and symbols are not
 * lookups by name and pass.
 */
const ownProperties = {
  meta: {
    type: 'problem',
    schema: [],
    messages: {
      read: 'A lookup by a non-literal key on a record reads inherited properties too ("constructor", "__proto__"): use own(record, key) from shared/own.ts, Object.hasOwn or a Map.',
      in: 'The `in` operator with a non-literal key sees inherited properties too ("constructor", "toString"): use Object.hasOwn(record, key) or a Map.',
    },
  },
  create(context) {
    const services = context.sourceCode.parserServices;
    if (!services?.program || !services.esTreeNodeToTSNodeMap) return {};
    const checker = services.program.getTypeChecker();
    const typeOf = (node) => checker.getTypeAtLocation(services.esTreeNodeToTSNodeMap.get(node));
    const parts = (t) => (t.isUnion() ? t.types : [t]);
    // A key that names one thing the code chose: a literal (or a union of them), a number, a symbol.
    const chosenKey = (t) =>
      parts(t).every(
        (p) =>
          p.isLiteral() ||
          (p.flags & (ts.TypeFlags.NumberLike | ts.TypeFlags.ESSymbolLike | ts.TypeFlags.BooleanLike | ts.TypeFlags.Undefined | ts.TypeFlags.Null)) !== 0,
      );
    const isRecord = (t) =>
      parts(checker.getNonNullableType(t)).some(
        (p) => !checker.isArrayType(p) && !checker.isTupleType(p) && checker.getIndexInfoOfType(p, ts.IndexKind.String) !== undefined,
      );
    const written = (node) => {
      const p = node.parent;
      return (
        (p.type === 'AssignmentExpression' && p.left === node) || p.type === 'UpdateExpression' || (p.type === 'UnaryExpression' && p.operator === 'delete')
      );
    };
    return {
      MemberExpression(node) {
        if (!node.computed || node.property.type === 'Literal' || written(node)) return;
        if (chosenKey(typeOf(node.property)) || !isRecord(typeOf(node.object))) return;
        context.report({ node, messageId: 'read' });
      },
      "BinaryExpression[operator='in']"(node) {
        if (node.left.type === 'Literal' || node.left.type === 'PrivateIdentifier' || chosenKey(typeOf(node.left))) return;
        context.report({ node, messageId: 'in' });
      },
    };
  },
};

export default tseslint.config(
  {
    ignores: [
      'node_modules/**',
      'cdk.out/**',
      '.rollout/**',
      'coverage/**',
      'dist/**',
      'packages/*/dist/**',
      'docs/.vitepress/dist/**',
      'docs/.vitepress/cache/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { local: { rules: { 'own-properties': ownProperties } } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true, allowNullish: true }],
      'no-restricted-syntax': [
        'error',
        {
          selector: 'CallExpression[callee.object.name=/^(it|test|describe)$/][callee.property.name=/^(only|skip|todo)$/]',
          message: 'No focused or skipped tests.',
        },
      ],
    },
  },
  // infra/ is deployment only: the models in tools/ read it, never the other way round.
  {
    files: ['infra/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/tools/**'], message: 'infra/ is deployment only: the models in tools/ read it, not the other way round.' }] },
      ],
    },
  },
  // Where names come from users (specs, requests, tokens, config): lookups by name see own properties only.
  {
    files: ['shared/**/*.ts', 'functions/**/*.ts'],
    rules: { 'local/own-properties': 'error' },
  },
  // The direction of imports: the core (shared/, adapters and the composition root aside) sees ports
  // only; adapters and the composition root do not know the runtimes that use them. The picture in
  // README's Architecture section stays true.
  {
    files: ['shared/**/*.ts'],
    ignores: ['shared/adapters/**', 'shared/compose/**', 'shared/runtimes/**', 'shared/client/**', 'shared/index.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['pg', '@electric-sql/*', '@aws-sdk/*', '@aws-lambda-powertools/*'],
              message: 'The core imports ports only: a driver or SDK belongs in an adapter (shared/adapters/).',
            },
            {
              group: ['**/adapters/**', '**/compose/**', '**/runtimes/**'],
              message: 'The core imports ports only: a runtime chooses the adapters and passes them in.',
            },
            {
              group: ['**/infra/**', '**/functions/**', '**/tools/**', '**/test/**', 'aws-cdk-lib', 'aws-cdk-lib/*', 'constructs'],
              message: 'The core does not know its runtimes or its deployment.',
            },
          ],
        },
      ],
    },
  },
  // The package's client (an adapter of the HTTP API for its users) and its entry are adapters too.
  {
    files: ['shared/adapters/**/*.ts', 'shared/compose/**/*.ts', 'shared/client/**/*.ts', 'shared/index.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/infra/**', '**/functions/**', '**/tools/**', '**/test/**', 'aws-cdk-lib', 'aws-cdk-lib/*', 'constructs'],
              message: 'Adapters do not know the runtimes that choose them or the deployment.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['functions/**/*.ts', 'shared/runtimes/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/infra/**', '**/tools/**', '**/test/**', 'aws-cdk-lib', 'aws-cdk-lib/*', 'constructs'],
              message: 'A runtime carries no deployment code: what the stack and the runtimes both read lives in shared/ (shared/topology.ts).',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
  },
);
