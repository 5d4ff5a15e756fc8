/** Wire tags of opentelemetry.proto.common.v1 (KeyValue, AnyValue, lists). */
import { fieldTag, I64, LEN, VARINT } from './wire.ts';

export const KEY_VALUE_KEY = fieldTag(1, LEN);
export const KEY_VALUE_VALUE = fieldTag(2, LEN);

/** ArrayValue.values and KeyValueList.values. */
export const LIST_VALUES = fieldTag(1, LEN);

export const ANY_STRING = fieldTag(1, LEN);
export const ANY_BOOL = fieldTag(2, VARINT);
export const ANY_INT = fieldTag(3, VARINT);
export const ANY_DOUBLE = fieldTag(4, I64);
export const ANY_ARRAY = fieldTag(5, LEN);
export const ANY_KVLIST = fieldTag(6, LEN);
export const ANY_BYTES = fieldTag(7, LEN);

/** Whether a tag is one of AnyValue's oneof fields (others are unknown and skipped). */
export function isAnyValueTag(tag: number): boolean {
  return tag === ANY_STRING || tag === ANY_BOOL || tag === ANY_INT || tag === ANY_DOUBLE
    || tag === ANY_ARRAY || tag === ANY_KVLIST || tag === ANY_BYTES;
}
