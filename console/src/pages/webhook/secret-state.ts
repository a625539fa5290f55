import { useQueryClient } from '@tanstack/react-query';
import type { Webhook, WebhookWithSecret } from '../../api/types.ts';

export const WEBHOOK_SECRET_KEY = ['webhook', 'secret-once'] as const;

const hasSecret = (webhook: Webhook | WebhookWithSecret): webhook is WebhookWithSecret => 'secret' in webhook;

/**
 * A webhook answer that carries the signing secret (create, rotate) is kept in the query cache, never stored,
 * until the user confirms they copied it; the webhook query gets the answer without the secret.
 */
export function useWebhookAnswer(): (webhook: Webhook | WebhookWithSecret) => Promise<void> {
  const queryClient = useQueryClient();
  return async (webhook) => {
    if (hasSecret(webhook)) queryClient.setQueryData(WEBHOOK_SECRET_KEY, webhook.secret);
    await queryClient.invalidateQueries({ queryKey: ['webhook'], exact: true });
  };
}
