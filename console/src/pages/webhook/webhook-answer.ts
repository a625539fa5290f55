import { useQueryClient } from '@tanstack/react-query';
import type { Webhook, WebhookWithSecret } from '../../api/types.ts';

export const WEBHOOK_KEY = ['webhook'] as const;

const hasSecret = (webhook: Webhook | WebhookWithSecret): webhook is WebhookWithSecret => 'secret' in webhook;

/**
 * What to do with a webhook answer: a signing secret it carries (create, rotate: the only times it is shown)
 * goes to `onSecret`, held in the page's memory only; the webhook is read again.
 */
export function useWebhookAnswer(
  onSecret: (secret: string) => void,
): (webhook: Webhook | WebhookWithSecret) => Promise<void> {
  const queryClient = useQueryClient();
  return async (webhook) => {
    if (hasSecret(webhook)) onSecret(webhook.secret);
    await queryClient.invalidateQueries({ queryKey: WEBHOOK_KEY, exact: true });
  };
}
