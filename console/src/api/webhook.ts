import { api, type Query } from './client.ts';
import type { PutWebhookBody } from '@ent/contract/webhook';
import type { ConsoleWebhook, Page, Webhook, WebhookDelivery, WebhookWithSecret } from './types.ts';

export const webhookApi = {
  /**
   * The console's read (docs/console-api.md): null when the organization has none yet, where GET /org/webhook
   * answers 404 and the browser would log that as a failed load each time the page opens.
   */
  get: async (): Promise<Webhook | null> => (await api.get<ConsoleWebhook>('/console/api/webhook')).webhook,
  put: (input: PutWebhookBody) => api.put<WebhookWithSecret | Webhook>('/org/webhook', input),
  rotate: () => api.post<WebhookWithSecret>('/org/webhook/rotate'),
  enable: () => api.post<Webhook>('/org/webhook/enable'),
  disable: () => api.post<Webhook>('/org/webhook/disable'),
  deliveries: (query: Query) =>
    api.get<Page & { deliveries: WebhookDelivery[] }>('/org/webhook/deliveries', query),
};
