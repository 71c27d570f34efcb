// svcd's HTTP client for the tower, authenticated with the node JWT.
import { HttpTransportError, requestJson } from '../../lib/http.js';
import { errorFromProblem, SvcError } from '../../protocol/errors.js';

/** The tower's HTTP API, called with the node JWT. Errors are SvcErrors (tower_unreachable …). */
export interface TowerApi {
  readonly baseUrl: string;
  request<T>(method: string, path: string, body?: unknown): Promise<T>;
}

export function createTowerApi(baseUrl: string, jwt: string): TowerApi {
  return {
    baseUrl,
    async request<T>(method: string, path: string, body?: unknown): Promise<T> {
      let res: Awaited<ReturnType<typeof requestJson>>;
      try {
        res = await requestJson(baseUrl + path, method, { token: jwt, body });
      } catch (e) {
        if (e instanceof HttpTransportError) {
          throw new SvcError('tower_unreachable', `cannot reach the tower at ${baseUrl} (${e.causeCode})`);
        }
        throw e;
      }
      if (res.status >= 400) throw errorFromProblem(res.status, res.text);
      return (res.text ? JSON.parse(res.text) : undefined) as T;
    },
  };
}
