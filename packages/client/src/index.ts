/**
 * `rollout-control-plane-client`: the main entry of `rollout-control-plane`
 * (the typed client, the spec's parser and input types, the assignment rule)
 * without the server, the store drivers or the AWS SDK. SigV4 signing
 * (`awsRegion`) loads `@smithy/signature-v4` and
 * `@aws-sdk/credential-provider-node` when first used: optional peers.
 */
export * from '../../../shared/index.js';
