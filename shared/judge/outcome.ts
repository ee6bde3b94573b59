/** How a reading with too little data to judge begins its reason: the evaluator stretches a bake on it (rollout/evaluate.ts). */
export const NOT_ENOUGH_DATA = 'not enough data';
