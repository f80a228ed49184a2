// JSON Schema -> Automaton: the structured-output compiler. The automaton accepts exactly JSON texts
// that validate against the schema (a subset of them where noted), so generation under it always
// parses and validates.
//
// The subset (anything else is a SchemaError naming the keyword and its JSON path):
//  - type: object, array, string, number, integer, boolean, null, or a list of them;
//  - object: properties (written in the schema's order), required (the others may be left out),
//    additionalProperties false or true/absent (no property beyond those listed is written; with no
//    properties at all, any object); a required name must be listed in properties;
//  - array: items (one schema; absent = any value), minItems, maxItems (<= kMaxCount);
//  - string: minLength, maxLength (<= kMaxCount, counted in code points as JSON Schema does),
//    pattern (regex.h's subset), format: date, time, date-time, uuid (pattern or format, not with
//    lengths);
//  - enum, const (any JSON values; with `type`, only the values of those types), anyOf, $ref to
//    "#", "#/$defs/NAME" or "#/definitions/NAME" (recursion included), $defs/definitions;
//  - ignored annotations: description, title, default, examples, $comment, $schema, $id;
//  - true (any JSON value); {} likewise.
// Numbers are written with at most 15 integer digits (safe integers in every JSON parser), 16
// fraction digits and a two-digit exponent.
//
// Thread safety: compile functions are pure.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "grammar/automaton.h"
#include "grammar/schema_error.h"

namespace rocket::grammar {

constexpr int kMaxCount = 256;
// A schema whose automaton would pass this many nodes is refused (memory per request stays bounded).
constexpr size_t kMaxNodes = 400000;

// REQUIRES: nothing; throws SchemaError (path from "$").
std::shared_ptr<const Automaton> compile_schema(const nlohmann::ordered_json& schema);
// Any JSON object (response_format json_object).
std::shared_ptr<const Automaton> compile_any_object();

// For grammars that embed JSON values (tool calls' arguments): the fragment, in `a`, of one value of
// `schema`, a part of `root` (its $refs resolve against `root`; pass the same object for both at the
// top). No whitespace before or after. `no_close_tags`: its strings (but for `pattern` and enum/const
// values, written as the schema says) never hold a raw "</" ("<\/" is written instead), so that no
// closing tag appears inside the value. Throws SchemaError at `path`.
Fragment schema_value(Automaton& a, const nlohmann::ordered_json& root, const nlohmann::ordered_json& schema,
                      const std::string& path, bool no_close_tags = false);
// The fragment, in `a`, of any JSON object.
Fragment any_object_value(Automaton& a, bool no_close_tags = false);

}  // namespace rocket::grammar
