// Type-aware lint: floating promises and misused async callbacks are the bugs
// that break lease loops silently, so those rules are errors.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', 'cdk.out/**', '.rollout/**', 'coverage/**', 'dist/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true, allowNullish: true }],
      'no-restricted-syntax': [
        'error',
        { selector: "CallExpression[callee.object.name=/^(it|test|describe)$/][callee.property.name=/^(only|skip|todo)$/]", message: 'No focused or skipped tests.' },
      ],
    },
  },
  // The direction of imports: the core (shared/, adapters and the composition root aside) sees ports
  // only; adapters and the composition root do not know the runtimes that use them. The picture in
  // README's Architecture section stays true.
  {
    files: ['shared/**/*.ts'],
    ignores: ['shared/adapters/**', 'shared/compose/**', 'shared/runtimes/**', 'shared/client/**', 'shared/index.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [
          { group: ['pg', '@electric-sql/*', '@aws-sdk/*', '@aws-lambda-powertools/*'], message: 'The core imports ports only: a driver or SDK belongs in an adapter (shared/adapters/).' },
          { group: ['**/adapters/**', '**/compose/**', '**/runtimes/**'], message: 'The core imports ports only: a runtime chooses the adapters and passes them in.' },
          { group: ['**/infra/**', '**/functions/**', 'aws-cdk-lib', 'aws-cdk-lib/*', 'constructs'], message: 'The core does not know its runtimes or its deployment.' },
        ],
      }],
    },
  },
  // The package's client (an adapter of the HTTP API for its users) and its entry are adapters too.
  {
    files: ['shared/adapters/**/*.ts', 'shared/compose/**/*.ts', 'shared/client/**/*.ts', 'shared/index.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [{ group: ['**/infra/**', '**/functions/**', 'aws-cdk-lib', 'aws-cdk-lib/*', 'constructs'], message: 'Adapters do not know the runtimes that choose them or the deployment.' }],
      }],
    },
  },
  {
    files: ['functions/**/*.ts', 'shared/runtimes/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', {
        patterns: [{ group: ['**/infra/**', 'aws-cdk-lib', 'aws-cdk-lib/*', 'constructs'], message: 'A runtime carries no deployment code: what the stack and the runtimes both read lives in shared/ (shared/topology.ts).' }],
      }],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
  },
);
