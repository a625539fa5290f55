export const MEMBERS_KEY = ['members', 'users'] as const;
export const INVITES_KEY = ['invites'] as const;
