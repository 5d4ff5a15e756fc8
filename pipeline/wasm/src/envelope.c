/*
 * The envelope all three export requests share (pipeline/otlp/envelope.ts):
 *   Export*ServiceRequest { repeated Resource* = 1 }
 *   Resource* { Resource resource = 1; repeated Scope* = 2; string schema_url = 3 }
 *   Scope*    { InstrumentationScope scope = 1; repeated <item> = 2; string schema_url = 3 }
 * The resource and scope columns are encoded once per Resource* and Scope* into the row
 * prefix, which every row of their items starts with.
 */
#include "sluice.h"

#define FIRST TAG(1, LEN)
#define ITEMS TAG(2, LEN)
#define SCHEMA_URL TAG(3, LEN)
#define RESOURCE_ATTRIBUTES TAG(1, LEN)
#define SCOPE_NAME TAG(1, LEN)
#define SCOPE_VERSION TAG(2, LEN)
#define SCOPE_ATTRIBUTES TAG(3, LEN)
#define SCOPE_DROPPED_ATTRIBUTES TAG(4, VARINT)

typedef struct {
  u32 start, end, schema_url_start, schema_url_end;
} EnvelopeFields;

void prefix_init(RowPrefix *prefix, u32 columns, const u8 *source_id, u32 source_length) {
  buf_init(&prefix->w, 4096);
  prefix->columns = columns;
  w_encoded(&prefix->w, source_id, source_length);
  prefix->source_end = prefix->resource_end = prefix->scope_end = prefix->w.pos;
}

static void set_resource(RowPrefix *prefix, const EnvelopeFields *resource) {
  Buf *w = &prefix->w;
  w->pos = prefix->source_end;
  if (prefix->columns & RESOURCE_SERVICE_NAME) {
    u32 value_start, value_end;
    if (find_attribute(resource->start, resource->end, RESOURCE_ATTRIBUTES, (const u8 *)"service.name", 12, &value_start, &value_end)) {
      write_any_value(w, value_start, value_end);
    } else {
      w_empty_string(w);
    }
  }
  if (prefix->columns & RESOURCE_ATTRIBUTES_COLUMN) write_all_attributes(w, resource->start, resource->end, RESOURCE_ATTRIBUTES);
  if (prefix->columns & RESOURCE_SCHEMA_URL) w_utf8(w, resource->schema_url_start, resource->schema_url_end);
  prefix->resource_end = prefix->scope_end = w->pos;
}

static void set_scope(RowPrefix *prefix, const EnvelopeFields *scope) {
  Buf *w = &prefix->w;
  w->pos = prefix->resource_end;
  u32 name_start = 0, name_end = 0, version_start = 0, version_end = 0, dropped = 0;
  P = scope->start;
  while (P < scope->end) {
    u32 tag = rd_tag(scope->end);
    if (tag == SCOPE_NAME || tag == SCOPE_VERSION) {
      u32 field_end = rd_len(scope->end);
      if (tag == SCOPE_NAME) {
        name_start = P;
        name_end = field_end;
      } else {
        version_start = P;
        version_end = field_end;
      }
      P = field_end;
    } else if (tag == SCOPE_DROPPED_ATTRIBUTES) {
      dropped = rd_uint32(scope->end);
    } else {
      rd_skip(tag, scope->end);
    }
  }
  rd_expect_end(scope->end);
  if (prefix->columns & SCOPE_NAME_COLUMN) w_utf8(w, name_start, name_end);
  if (prefix->columns & SCOPE_VERSION_COLUMN) w_utf8(w, version_start, version_end);
  if (prefix->columns & SCOPE_ATTRIBUTES_COLUMN) write_all_attributes(w, scope->start, scope->end, SCOPE_ATTRIBUTES);
  if (prefix->columns & SCOPE_DROPPED_COLUMN) w_u32(w, dropped);
  if (prefix->columns & SCOPE_SCHEMA_URL) w_utf8(w, scope->schema_url_start, scope->schema_url_end);
  prefix->scope_end = w->pos;
}

Buf *prefix_extend(RowPrefix *prefix) {
  prefix->w.pos = prefix->scope_end;
  return &prefix->w;
}

/* Finds field 1 (the resource or scope) and field 3 (schema_url) of an envelope message. */
static void scan_envelope(u32 start, u32 end, EnvelopeFields *into) {
  into->start = into->end = into->schema_url_start = into->schema_url_end = 0;
  P = start;
  while (P < end) {
    u32 tag = rd_tag(end);
    if (tag != FIRST && tag != SCHEMA_URL) {
      rd_skip(tag, end);
      continue;
    }
    u32 field_end = rd_len(end);
    if (tag == FIRST) {
      into->start = P;
      into->end = field_end;
    } else {
      into->schema_url_start = P;
      into->schema_url_end = field_end;
    }
    P = field_end;
  }
  rd_expect_end(end);
}

/* The next length-delimited field with `tag` from P in [P, end): sets *field_start and returns its end, or NONE at the end. */
static u32 next_field(u32 end, u32 tag, u32 *field_start) {
  while (P < end) {
    u32 t = rd_tag(end);
    if (t != tag) {
      rd_skip(t, end);
      continue;
    }
    u32 field_end = rd_len(end);
    *field_start = P;
    return field_end;
  }
  rd_expect_end(end);
  return NONE;
}

void walk_request(RowPrefix *prefix, ItemVisitor visit) {
  EnvelopeFields fields;
  u32 resource_start, resource_end, scope_start, scope_end, item_start, item_end;
  P = 0;
  while ((resource_end = next_field(R_LENGTH, FIRST, &resource_start)) != NONE) {
    scan_envelope(resource_start, resource_end, &fields);
    set_resource(prefix, &fields);
    P = resource_start;
    while ((scope_end = next_field(resource_end, ITEMS, &scope_start)) != NONE) {
      scan_envelope(scope_start, scope_end, &fields);
      set_scope(prefix, &fields);
      P = scope_start;
      while ((item_end = next_field(scope_end, ITEMS, &item_start)) != NONE) {
        visit(item_start, item_end);
        P = item_end;
      }
      P = scope_end;
    }
    P = resource_end;
  }
}
