/*
 * The module's heap and the outcome of a call. The heap is an arena from __heap_base up:
 * everything a call allocates is let go at once when the next call starts (arena_reset), so
 * nothing is freed one by one. A buffer that grows moves to the top of the arena unless it is
 * there already (then it grows in place); what it leaves behind is reclaimed with the rest.
 * The linear memory grows as the arena needs, up to the maximum the loader gave it; past that
 * the call ends (out_of_memory) and the request goes to the JavaScript transcoder.
 */
#include "sluice.h"

extern u8 __heap_base;

Result result;

static u32 heap_top;

void arena_reset(void) {
  heap_top = (u32)(uintptr_t)&__heap_base;
}

/* Makes the linear memory reach `end` (a byte offset), growing it if it must. */
static void reach(u64 end) {
  u64 size = (u64)__builtin_wasm_memory_size(0) * 65536;
  if (end <= size) return;
  u64 pages = (end - size + 65535) / 65536;
  if (end > 0xffffffffull || __builtin_wasm_memory_grow(0, (size_t)pages) == (size_t)-1) out_of_memory();
}

void *arena_alloc(u32 bytes) {
  u64 at = ((u64)heap_top + 7) & ~7ull;
  reach(at + bytes);
  heap_top = (u32)(at + bytes);
  return (void *)(uintptr_t)at;
}

void buf_init(Buf *b, u32 cap) {
  b->data = arena_alloc(cap);
  b->pos = 0;
  b->cap = cap;
}

void buf_grow(Buf *b, u32 bytes) {
  u64 want = (u64)b->pos + bytes;
  u64 cap = (u64)b->cap * 2;
  if (cap < want) cap = want;
  if (cap < 64) cap = 64;
  if (cap > 0xffffffffull) out_of_memory();
  if ((u32)(uintptr_t)b->data + b->cap == heap_top) {
    /* The top of the arena: grow in place. */
    reach((u64)(uintptr_t)b->data + cap);
    heap_top = (u32)((uintptr_t)b->data + cap);
  } else {
    u8 *data = arena_alloc((u32)cap);
    if (b->pos > 0) __builtin_memcpy(data, b->data, b->pos);
    b->data = data;
  }
  b->cap = (u32)cap;
}

/*
 * Short copies (strings of a few dozen bytes) in a loop, eight bytes at a time; long ones with
 * memory.copy, which V8 runs as a call out of the module (worth it past a few hundred bytes).
 */
void copy_bytes(u8 *to, const u8 *from, u32 n) {
  if (n > 256) {
    __builtin_memcpy(to, from, n);
    return;
  }
  for (; n >= 8; n -= 8, to += 8, from += 8) {
    u64 word;
    __builtin_memcpy(&word, from, 8);
    __builtin_memcpy(to, &word, 8);
  }
  while (n--) *to++ = *from++;
}

Buf *message(void) {
  Buf *m = arena_alloc(sizeof(Buf));
  buf_init(m, 256);
  return m;
}

_Noreturn void refuse(Buf *m) {
  result.status = REFUSED;
  result.message = (u32)(uintptr_t)m->data;
  result.message_length = m->pos;
  __builtin_trap();
}

_Noreturn void refuse_text(const char *text) {
  Buf *m = message();
  put_text(m, text);
  refuse(m);
}

_Noreturn void out_of_memory(void) {
  result.status = OUT_OF_MEMORY;
  __builtin_trap();
}
