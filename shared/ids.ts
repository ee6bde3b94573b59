/**
 * What an id of a rollout or run may be, in a body or a path (one rule for the
 * API and the OpenFeature provider): characters a path segment carries as they
 * are, so every URL client sends the id it was given. Not `.` or `..`: clients
 * (WHATWG URL, curl, proxies) resolve those as dot segments, so no path would
 * reach the rollout or run.
 */
export const ID_RULE = /^(?!\.\.?$)[A-Za-z0-9_.:-]{1,128}$/;
export const ID_MESSAGE = 'letters, digits, _ . : - (at most 128), not . or ..';
