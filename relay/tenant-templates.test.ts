/**
 * A tenant's templates: the caps on how many and how many bytes (a tenant already past one from
 * before it existed can still shrink and rename), and the listing's pages, whose cursor keeps
 * templates made in the same millisecond apart.
 */
import { describe, expect, it } from 'vitest';
import type { Template } from './model.ts';
import { checkTenantCaps, TEMPLATE_LIMITS, templatePage } from './tenant-templates.ts';

const AT = '2026-11-28T10:00:00.000Z';
const template = (id: string, html = 'h', createdAt = AT): Template => ({ id, tenantId: 'ten_a', name: 'n', subject: 's', html, createdAt, updatedAt: createdAt });
const many = (count: number, html = 'h') => Array.from({ length: count }, (_, i) => template(`tpl_${String(i).padStart(3, '0')}`, html));

describe('checkTenantCaps', () => {
  it('refuses a new template past the count, but lets a tenant past it change the ones it has', () => {
    const stored = many(TEMPLATE_LIMITS.perTenant + 5);
    expect(() => checkTenantCaps(stored, template('tpl_new'))).toThrow('A tenant keeps at most 100 templates: delete one first');
    expect(() => checkTenantCaps(stored, { ...stored[0]!, name: 'renamed' })).not.toThrow();
  });

  it('refuses bytes past the cap on a create or a change that grows, not on one that shrinks', () => {
    const stored = many(21, 'x'.repeat(100_000));
    expect(() => checkTenantCaps(stored.slice(0, 20), template('tpl_new', 'x'.repeat(100_000)))).toThrow(/^A tenant's templates hold at most 2,097,152 bytes together .*: with this one they would hold 2,100,042$/);
    expect(() => checkTenantCaps(stored, { ...stored[0]!, html: 'x'.repeat(100_001) })).toThrow(/would hold/);
    expect(() => checkTenantCaps(stored, { ...stored[0]!, html: 'x' })).not.toThrow();
  });
});

describe('templatePage', () => {
  it('pages newest first, templates of the same millisecond by id, each once', () => {
    const stored = [...many(5), template('tpl_later', 'h', '2026-11-28T10:00:01.000Z')];
    const first = templatePage(stored, { limit: 4 });
    expect(first.templates.map((t) => t.id)).toEqual(['tpl_later', 'tpl_004', 'tpl_003', 'tpl_002']);
    const second = templatePage(stored, { limit: 4, before: first.nextBefore! });
    expect(second).toEqual({ templates: [expect.objectContaining({ id: 'tpl_001' }), expect.objectContaining({ id: 'tpl_000' })] });
    expect(first.templates[0]).not.toHaveProperty('html');
  });
});
