/** The OpenFeature provider, as `rollout-control-plane/openfeature` exports it; `@openfeature/server-sdk` is a peer. */
export * from '../../../shared/openfeature/provider.js';
