import type { Cluster, Redis } from 'ioredis';

/** A single-node or cluster client: everything the services do with Redis works on either. */
export type RedisClient = Redis | Cluster;
