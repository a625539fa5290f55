import { OFREPProvider } from '@openfeature/ofrep-provider';
import { OpenFeature } from '@openfeature/server-sdk';

export async function openFeatureExample(baseUrl: string, apiKey: string) {
  // The gateway speaks OFREP: the unmodified OpenFeature server SDK and OFREP provider, no plugin of ours.
  await OpenFeature.setProviderAndWait(
    new OFREPProvider({ baseUrl, headers: [['Authorization', `Bearer ${apiKey}`]] }),
  );
  const client = OpenFeature.getClient();
  const context = { targetingKey: 'ann' }; // the subscriber id
  const sso = await client.getBooleanValue('sso', false, context); // a flag: `allowed`
  const seats = await client.getNumberDetails('seats', 0, context); // a limit; unlimited = MAX_SAFE_INTEGER
  // seats.reason: 'TARGETING_MATCH' for an override, 'STATIC' otherwise; seats.flagMetadata.source says which.
  return { sso, seats: seats.value, reason: seats.reason, source: seats.flagMetadata.source };
}
