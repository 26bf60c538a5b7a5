export {
  CoordinatorClient,
  type ChangeMeta,
  type CoordinatorClientOptions,
} from './coordinator-client.js';
export { CoordinatorApiError } from './errors.js';
