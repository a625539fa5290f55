export const SERVICE_ACCOUNTS_KEY = ['service-accounts'] as const;
export const apiKeysKey = (serviceAccountId: string) => ['api-keys', serviceAccountId] as const;
