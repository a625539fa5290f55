// The README's "Use it from your code" example (the README imports '@entitlements/sdk'); sdk/test/eval-client.test.ts
// runs it and checks the README holds this code.
import { EntitlementsError, EvalClient, createApiClient } from '../src/index.ts';

export async function readmeExample(baseUrl: string, apiKey: string) {
  // Typed client for the whole API (types generated from /openapi.json).
  const api = createApiClient({ baseUrl, apiKey });
  const { data: features } = await api.GET('/org/features');

  // Evals with a local cache, fallbacks and retries. The key is a server-side secret.
  const entitlements = new EvalClient({
    baseUrl,
    apiKey,
    cacheTtlMs: 30_000,
    fallbacks: { seats: 5 }, // answered (fallback: true) when the service cannot be asked
    failModes: { sso: 'closed' },
    defaultFailMode: 'open',
  });
  try {
    const sso = await entitlements.check('cust_42', 'sso'); // { allowed, limit, source, fallback, stale, usage }
    const seats = await entitlements.check('cust_42', 'seats'); // from the cache: no request
    const all = await entitlements.list('cust_42');
    return { features, sso, seats, all, usage: entitlements.lastUsage };
  } catch (error) {
    if (error instanceof EntitlementsError && error.code === 'NOT_FOUND') return null; // no such subscriber
    throw error;
  } finally {
    await entitlements.close();
  }
}
