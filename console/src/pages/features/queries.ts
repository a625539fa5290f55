import { useQuery } from '@tanstack/react-query';
import { catalogApi } from '../../api/catalog.ts';

export const FEATURES_KEY = ['features'] as const;

export const useFeatures = () => useQuery({ queryKey: FEATURES_KEY, queryFn: catalogApi.features });
