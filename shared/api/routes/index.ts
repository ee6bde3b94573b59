import type { RouteDef } from '../route.js';
import { clusterHealth, clusterLeader, clusterStatus, openapi } from './cluster.js';
import { clusterEvents, coordinator, metrics, postEvent, statusPage, uiState } from './node.js';
import {
  commandRoutes,
  createRollout,
  getRollout,
  listRollouts,
  rolloutAssignment,
  rolloutHistory,
  rolloutReadings,
  rolloutTraffic,
  testRolloutGate,
} from './rollouts.js';
import { cancelRun, createRun, getRun, listRuns, runItems } from './runs.js';
import { WORK_ROUTES } from './work.js';

export const API_VERSION = '0.1.0';

/** Every route, in the order the OpenAPI document lists them. */
export const ROUTES = [
  clusterStatus,
  clusterLeader,
  clusterHealth,
  clusterEvents,
  openapi,
  createRollout,
  listRollouts,
  getRollout,
  rolloutHistory,
  rolloutAssignment,
  rolloutTraffic,
  rolloutReadings,
  testRolloutGate,
  ...commandRoutes,
  createRun,
  listRuns,
  getRun,
  runItems,
  cancelRun,
  ...WORK_ROUTES,
  statusPage,
  metrics,
  uiState,
  postEvent,
  coordinator,
] as const;

/** Any route, typed by its id. */
export type Route = (typeof ROUTES)[number];
export type RouteId = Route['id'];
/** The routes a node alone serves, and those the deployed API serves too. */
export type NodeRoute = Extract<Route, { readonly nodeOnly: true }>;
export type SharedRoute = Exclude<Route, NodeRoute>;

/** The routes the deployed API serves (not a node's own). */
export const SHARED_ROUTES = ROUTES.filter((r): r is SharedRoute => !(r as RouteDef).nodeOnly);
