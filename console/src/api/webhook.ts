import { api, type Query } from './client.ts';
import type { Page, Webhook, WebhookDelivery, WebhookWithSecret } from './types.ts';

export const webhookApi = {
  /** 404 NOT_FOUND when the organization has none yet. */
  get: () => api.get<Webhook>('/org/webhook'),
  put: (input: { url: string; disabled?: boolean }) =>
    api.put<WebhookWithSecret | Webhook>('/org/webhook', input),
  rotate: () => api.post<WebhookWithSecret>('/org/webhook/rotate'),
  enable: () => api.post<Webhook>('/org/webhook/enable'),
  disable: () => api.post<Webhook>('/org/webhook/disable'),
  deliveries: (query: Query) =>
    api.get<Page & { deliveries: WebhookDelivery[] }>('/org/webhook/deliveries', query),
};
