import { monotonicFactory } from 'ulidx';

const nextUlid = monotonicFactory();

export type IdPrefix = 'aud' | 'ovr' | 'sub' | 'sa' | 'mem' | 'key' | 'inv' | 'org' | 'feat' | 'plan' | 'evt' | 'whd' | 'req' | 'ses' | 'cr';

/** Time-ordered, prefixed ids (ULID): ids made later sort after ids made earlier. */
export const newId = (prefix: IdPrefix): string => `${prefix}_${nextUlid().toLowerCase()}`;
