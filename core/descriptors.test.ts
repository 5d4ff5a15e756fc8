import { describe, expect, it } from 'vitest';
import { descriptorStatus, descriptorUse } from './descriptors.ts';

describe('descriptors', () => {
  it('reads the open descriptors and the soft limit of this process', async () => {
    const use = await descriptorUse();
    expect(use!.open).toBeGreaterThan(2);
    expect(use!.limit).toBeGreaterThan(use!.open);
    expect((await descriptorStatus()).ok).toBe(true);
  });

  it('is not ready near the limit, and says what to do', async () => {
    const status = await descriptorStatus(Promise.resolve({ open: 950, limit: 1024 }));
    expect(status).toEqual({
      ok: false,
      detail: '950 of 1024 file descriptors in use: raise the limit (ulimit -n) or shed connections',
      figures: { open: 950, limit: 1024 },
    });
  });
});
