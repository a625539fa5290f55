import type { AppError } from '@ent/common/errors/app-error';

/** What one line of a batch came to: a refusal keeps the error its single route would have answered. */
export type AppliedResult = { result: 'applied' | 'unchanged' } | { result: 'failed'; error: AppError };
