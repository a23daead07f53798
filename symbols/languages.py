"""Which grammar reads which file, and which nodes of each grammar are symbols.

Symbols are the definitions an agent leases: functions, methods, constructors, types (class,
struct, enum, interface, trait, union, record, object, protocol, module, Rust impl of a trait)
and, for Markdown/TOML/JSON/YAML, sections (symbols/sections.py). Definitions nested inside a
function body (closures, local classes) are part of that function, not symbols of their own.
Statements between definitions (imports, constants, `mod x;`) are the file's own text,
`path#<file>`; a type's fields and header are its own text, `path#Type.<def>`.

Overload keys (the `(key)` of `path#Name(key)`, only used when names collide):
- parameter types, whitespace-collapsed and comma-joined, for Java, C#, C++, Kotlin, Swift, Scala
  and TypeScript overload signatures: `Client.Charge(int,int)`;
- `[getter]`/`[setter]`/`[deleter]` for Python properties and JS/TS accessors: `P.x[setter]`;
  `[self]` for a Ruby singleton method beside an instance method of its name;
- the trait's generic arguments for Rust trait impls: `S.From(u8).from`.
Whatever is still alike is numbered in file order: the first keeps its name, then `init~2`.
So a Swift `extension Point` beside `struct Point`, or a Scala companion `object Cart` beside
`class Cart`, is `Point~2` / `Cart~2`: they are separate texts with the same name.

Test symbols: functions or methods named test* (Python, Ruby, PHP, Swift), Test* in Go, or marked
`#[test]` (Rust, including `#[tokio::test]`), `@Test`/`@ParameterizedTest` (Java, Kotlin, Scala),
`[Test]`/`[Fact]`/`[Theory]`/`[TestMethod]`/`[TestCase]` (C#). Skipped: decorators or attributes
naming skip (`@pytest.mark.skip*`, `@unittest.skip*`), `#[ignore]`, `@Disabled`/`@Ignore`,
`[Ignore]`/`Skip =`, and Go tests that call `t.Skip`. JavaScript test calls (`it(...)`) are
expressions, not definitions, and are not detected.

Import lines (for `import_only_files`) are the nodes listed in `imports`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

from tree_sitter import Node

# The name of a Rust `impl Type {}` until it joins its type (symbols/outline.py).
INHERENT = "<inherent>"

SECTION_LANGUAGES = frozenset({"markdown", "toml", "json", "yaml"})

EXTENSIONS = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".rs": "rust", ".go": "go", ".java": "java", ".cs": "csharp",
    ".c": "c", ".h": "c",
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".c++": "cpp", ".hh": "cpp", ".hpp": "cpp",
    ".hxx": "cpp", ".h++": "cpp", ".ipp": "cpp",
    ".rb": "ruby", ".php": "php", ".kt": "kotlin", ".kts": "kotlin", ".swift": "swift",
    ".scala": "scala", ".sc": "scala",
    ".md": "markdown", ".markdown": "markdown", ".toml": "toml", ".json": "json",
    ".yaml": "yaml", ".yml": "yaml",
}


@lru_cache(maxsize=1 << 16)
def language_of(path: str) -> str | None:
    """The grammar for `path` by its extension, or None for a file no grammar reads."""
    name = path.rsplit("/", 1)[-1]
    dot = name.rfind(".")
    if dot <= 0:
        return None
    return EXTENSIONS.get(name[dot:].lower())


def text(node: Node | None, src: bytes) -> str:
    """The node's text, sliced from the source: a tree parsed through a read callback (as the
    bounded parse does) would call that callback again for `Node.text`, 200 times slower."""
    return "" if node is None else src[node.start_byte:node.end_byte].decode("utf-8", "replace")


def squash(s: str) -> str:
    return " ".join(s.split())


def field_text(name: str) -> Callable[[Node, bytes], str | None]:
    def get(node: Node, src: bytes) -> str | None:
        child = node.child_by_field_name(name)
        return text(child, src) if child is not None else None
    return get


def first_child_text(*types: str) -> Callable[[Node, bytes], str | None]:
    def get(node: Node, src: bytes) -> str | None:
        for child in node.named_children:
            if child.type in types:
                return text(child, src)
        return None
    return get


def _strip_generics(s: str) -> str:
    return re.sub(r"<.*>", "", s).strip()


@dataclass(frozen=True)
class Rule:
    """How one node type becomes a symbol."""
    kind: str                       # "fn" = function, or method inside a type
    name: Callable[[Node, bytes], str | None] = field_text("name")
    body: Callable[[Node], Node | None] = lambda n: n.child_by_field_name("body")
    container: bool = False         # a type: members are symbols, the rest is its <def>
    key: Callable[[Node, bytes], str | None] | None = None
    owner: Callable[[Node, bytes], str | None] | None = None  # declared outside its type
    needs_body: bool = False        # without a body it is a declaration, not a definition


@dataclass(frozen=True)
class Lang:
    name: str
    rules: dict[str, Rule]
    # node types whose named children are walked as if they stood in the enclosing scope
    transparent: frozenset[str] = frozenset()
    # wrapper node type -> the definition it wraps (decorators, export, template)
    wrappers: dict[str, Callable[[Node], Node | None]] = field(default_factory=dict)
    leading: frozenset[str] = frozenset()    # preceding siblings that belong to the next symbol
    imports: frozenset[str] = frozenset()
    test_name: re.Pattern[str] | None = None
    test_mark: re.Pattern[str] | None = None  # searched in the signature (decorators included)
    skip_mark: re.Pattern[str] | None = None
    skip_body: re.Pattern[bytes] | None = None


# --- parameter keys -------------------------------------------------------------------------

def _param_types(params_field: str | None, param_types: tuple[str, ...],
                 type_field: str | None = "type",
                 params_child: tuple[str, ...] = ()) -> Callable[[Node, bytes], str | None]:
    """`(T1,T2)` from the parameters: each parameter's type field, or without a type field
    its last named child (Kotlin's type follows the name)."""
    def key(node: Node, src: bytes) -> str | None:
        params = node.child_by_field_name(params_field) if params_field else None
        if params is None:
            for child in node.named_children:
                if child.type in params_child:
                    params = child
                    break
        if params is None:
            return "()"
        parts = []
        for p in params.named_children:
            if p.type not in param_types:
                continue
            t = p.child_by_field_name(type_field) if type_field else p.named_children[-1]
            # TypeScript's type field is the annotation, colon included
            parts.append(squash(text(t if t is not None else p, src)).lstrip(":").strip())
        return "(" + ",".join(parts) + ")"
    return key


def _c_param_key(node: Node, src: bytes) -> str | None:
    decl = node.child_by_field_name("declarator")
    while decl is not None and decl.type != "function_declarator":
        decl = decl.child_by_field_name("declarator")
    params = decl.child_by_field_name("parameters") if decl is not None else None
    if params is None:
        return "()"
    parts = []
    for p in params.named_children:
        if p.type not in ("parameter_declaration", "optional_parameter_declaration",
                          "variadic_parameter_declaration"):
            continue
        s = p.start_byte
        default = p.child_by_field_name("default_value")
        whole = src[s:default.start_byte if default is not None else p.end_byte]
        ident = p.child_by_field_name("declarator")
        while ident is not None and ident.type not in ("identifier", "field_identifier"):
            ident = ident.child_by_field_name("declarator") or (
                ident.named_children[-1] if ident.named_children else None)
        if ident is not None:
            whole = whole[:ident.start_byte - s] + whole[ident.end_byte - s:]
        whole = whole.rstrip().rstrip(b"=")
        parts.append(squash(whole.decode("utf-8", "replace")))
    return "(" + ",".join(parts) + ")"


def _swift_param_key(node: Node, src: bytes) -> str | None:
    parts = [squash(text(c, src).split("=")[0]) for c in node.named_children if c.type == "parameter"]
    return "(" + ",".join(parts) + ")"


# --- names ----------------------------------------------------------------------------------

def _c_declarator_name(node: Node, src: bytes) -> tuple[str | None, str | None]:
    """(name, owner) of a C/C++ function definition: `int C::x()` -> ("x", "C")."""
    decl = node.child_by_field_name("declarator")
    while decl is not None and decl.type not in (
            "identifier", "field_identifier", "qualified_identifier", "destructor_name",
            "operator_name", "type_identifier"):
        nxt = decl.child_by_field_name("declarator")
        if nxt is None:
            nxt = next((c for c in decl.named_children if c.type in (
                "identifier", "field_identifier", "qualified_identifier", "destructor_name",
                "operator_name")), None)
        decl = nxt
    if decl is None:
        return None, None
    if decl.type == "qualified_identifier":
        full = squash(text(decl, src))
        scope, _, name = full.rpartition("::")
        return name, _strip_generics(scope).replace("::", ".") or None
    return squash(text(decl, src)), None


def _go_receiver(node: Node, src: bytes) -> str | None:
    recv = node.child_by_field_name("receiver")
    if recv is None:
        return None
    for p in recv.named_children:
        t = p.child_by_field_name("type")
        while t is not None and t.type in ("pointer_type", "generic_type", "parenthesized_type"):
            t = t.child_by_field_name("type") or (t.named_children[0] if t.named_children else None)
        if t is not None:
            return text(t, src)
    return None


def _go_type_kind(spec: Node, src: bytes) -> str:
    t = spec.child_by_field_name("type")
    return {"struct_type": "struct", "interface_type": "interface"}.get(
        t.type if t is not None else "", "type")


def _rust_impl_owner(node: Node, src: bytes) -> str | None:
    t = node.child_by_field_name("type")
    while t is not None and t.type in ("generic_type", "reference_type", "scoped_type_identifier"):
        inner = t.child_by_field_name("type") or t.child_by_field_name("name")
        if inner is None:
            break
        t = inner
    return _strip_generics(squash(text(t, src))) if t is not None else None


def _rust_impl_name(node: Node, src: bytes) -> str | None:
    trait = node.child_by_field_name("trait")
    if trait is None:
        return INHERENT
    if trait.type == "generic_type":
        trait = trait.child_by_field_name("type")
    if trait is not None and trait.type == "scoped_type_identifier":   # fmt::Display
        trait = trait.child_by_field_name("name")
    return squash(text(trait, src))


def _rust_impl_key(node: Node, src: bytes) -> str | None:
    trait = node.child_by_field_name("trait")
    args = trait.child_by_field_name("type_arguments") if trait is not None else None
    if args is None:
        return None
    return "(" + ",".join(squash(text(a, src)) for a in args.named_children) + ")"


def _kotlin_class_kind(node: Node, src: bytes) -> str:
    for child in node.children:
        if child.type == "interface":
            return "interface"
        if child.type == "modifiers" and b"enum" in src[child.start_byte:child.end_byte]:
            return "enum"
    return "class"


def _kotlin_body(node: Node) -> Node | None:
    for child in node.named_children:
        if child.type in ("class_body", "enum_class_body", "function_body"):
            return child
    return None


def _swift_kind(node: Node, src: bytes) -> str:
    kw = node.child_by_field_name("declaration_kind")
    word = text(kw, src) if kw is not None else (node.children[0].type if node.children else "class")
    return {"struct": "struct", "enum": "enum", "extension": "extension", "actor": "class"}.get(
        word, "class")


def _swift_name(node: Node, src: bytes) -> str | None:
    n = node.child_by_field_name("name")
    return _strip_generics(squash(text(n, src))) if n is not None else None


def _js_var_function(node: Node) -> Node | None:
    """The declarator of `const f = () => ...` (one declarator whose value is a function)."""
    decls = [c for c in node.named_children if c.type == "variable_declarator"]
    if len(decls) != 1:
        return None
    value = decls[0].child_by_field_name("value")
    if value is not None and value.type in ("arrow_function", "function_expression", "function",
                                            "generator_function"):
        return decls[0]
    return None


def _js_var_name(node: Node, src: bytes) -> str | None:
    decl = _js_var_function(node)
    name = decl.child_by_field_name("name") if decl is not None else None
    return text(name, src) if name is not None and name.type == "identifier" else None


def _js_var_body(node: Node) -> Node | None:
    decl = _js_var_function(node)
    value = decl.child_by_field_name("value") if decl is not None else None
    return value.child_by_field_name("body") if value is not None else None


def _accessor_key(node: Node, src: bytes) -> str | None:
    for child in node.children:
        if child.type in ("get", "set"):
            return f"[{child.type}ter]"
    return None


def _python_property_key(node: Node, src: bytes) -> str | None:
    """[getter]/[setter]/[deleter] from the decorators of a decorated definition."""
    parent = node.parent
    if parent is None or parent.type != "decorated_definition":
        return None
    for dec in parent.named_children:
        if dec.type != "decorator":
            continue
        d = src[dec.start_byte:dec.end_byte]
        if d.strip() in (b"@property", b"@functools.cached_property", b"@cached_property"):
            return "[getter]"
        for word in (b"setter", b"getter", b"deleter"):
            if d.endswith(b"." + word):
                return f"[{word.decode()}]"
    return None


def _decorated_inner(node: Node) -> Node | None:
    return node.child_by_field_name("definition")


def _export_inner(node: Node) -> Node | None:
    return node.child_by_field_name("declaration") or node.child_by_field_name("value")


def _last_named(node: Node) -> Node | None:
    return node.named_children[-1] if node.named_children else None


_C_NAME = lambda n, s: _c_declarator_name(n, s)[0]  # noqa: E731
_C_OWNER = lambda n, s: _c_declarator_name(n, s)[1]  # noqa: E731
_C_TYPES = {
    "struct_specifier": Rule("struct", container=True, needs_body=True),
    "union_specifier": Rule("union", container=True, needs_body=True),
    "enum_specifier": Rule("enum", container=True, needs_body=True),
    "type_definition": Rule("type", name=lambda n, s: squash(text(n.child_by_field_name("declarator"), s)),
                            body=lambda n: None),
}

_JS_RULES = {
    "function_declaration": Rule("function"),
    "generator_function_declaration": Rule("function"),
    "class_declaration": Rule("class", container=True),
    "method_definition": Rule("fn", key=_accessor_key),
    "lexical_declaration": Rule("function", name=_js_var_name, body=_js_var_body),
    "variable_declaration": Rule("function", name=_js_var_name, body=_js_var_body),
}
_TS_PARAMS = _param_types("parameters", ("required_parameter", "optional_parameter"))
_TS_RULES = {
    **_JS_RULES,
    "function_declaration": Rule("function", key=_TS_PARAMS),
    "function_signature": Rule("function", key=_TS_PARAMS),
    "method_definition": Rule("fn", key=lambda n, s: _accessor_key(n, s) or _TS_PARAMS(n, s)),
    "abstract_class_declaration": Rule("class", container=True),
    "interface_declaration": Rule("interface", container=True),
    "enum_declaration": Rule("enum", container=True),
    "type_alias_declaration": Rule("type", body=lambda n: None),
    "internal_module": Rule("module", container=True),
    "module": Rule("module", container=True),
}
_JS_TRANSPARENT = frozenset({"expression_statement"})
_JS_IMPORTS = frozenset({"import_statement"})

_JAVA_PARAMS = _param_types("parameters", ("formal_parameter", "spread_parameter"))
_CS_PARAMS = _param_types("parameters", ("parameter",))
_KT_PARAMS = _param_types(None, ("parameter",), type_field=None,
                          params_child=("function_value_parameters",))
_SCALA_PARAMS = _param_types("parameters", ("parameter",))

LANGS: dict[str, Lang] = {}


def _add(lang: Lang) -> None:
    LANGS[lang.name] = lang


_add(Lang(
    "python",
    rules={
        "function_definition": Rule("fn", key=_python_property_key),
        "class_definition": Rule("class", container=True),
    },
    wrappers={"decorated_definition": _decorated_inner},
    transparent=frozenset({"if_statement", "elif_clause", "else_clause", "try_statement",
                           "except_clause", "except_group_clause", "finally_clause",
                           "with_statement", "for_statement", "while_statement", "block"}),
    imports=frozenset({"import_statement", "import_from_statement", "future_import_statement"}),
    test_name=re.compile(r"^test"),
    skip_mark=re.compile(r"@\S*\bskip"),
))
_add(Lang("javascript", rules=_JS_RULES, wrappers={"export_statement": _export_inner},
          transparent=_JS_TRANSPARENT, imports=_JS_IMPORTS))
for _ts in ("typescript", "tsx"):
    _add(Lang(_ts, rules=_TS_RULES, wrappers={"export_statement": _export_inner},
              transparent=_JS_TRANSPARENT | {"ambient_declaration"}, imports=_JS_IMPORTS))
_add(Lang(
    "rust",
    rules={
        "function_item": Rule("fn"),
        "function_signature_item": Rule("fn"),
        "struct_item": Rule("struct", container=True),
        "enum_item": Rule("enum", container=True),
        "union_item": Rule("union", container=True),
        "trait_item": Rule("trait", container=True),
        "mod_item": Rule("module", container=True),
        "macro_definition": Rule("macro", body=lambda n: None),
        "impl_item": Rule("impl", name=_rust_impl_name, container=True, key=_rust_impl_key,
                          owner=_rust_impl_owner),
    },
    leading=frozenset({"attribute_item"}),
    imports=frozenset({"use_declaration", "extern_crate_declaration"}),
    test_mark=re.compile(r"#\[\s*(?:[\w:]+::)?test\b"),
    skip_mark=re.compile(r"#\[\s*ignore\b"),
))
_add(Lang(
    "go",
    rules={
        "function_declaration": Rule("function"),
        "method_declaration": Rule("method", owner=_go_receiver),
        "type_spec": Rule("type", container=True, body=lambda n: None),
        "type_alias": Rule("type", container=True, body=lambda n: None),
    },
    transparent=frozenset({"type_declaration"}),
    imports=frozenset({"import_declaration"}),
    test_name=re.compile(r"^(Test|Benchmark|Fuzz|Example)([^a-z]|$)"),
    skip_body=re.compile(rb"\.Skip(f|Now)?\("),
))
_add(Lang(
    "java",
    rules={
        "class_declaration": Rule("class", container=True),
        "interface_declaration": Rule("interface", container=True),
        "enum_declaration": Rule("enum", container=True),
        "record_declaration": Rule("record", container=True),
        "annotation_type_declaration": Rule("interface", container=True),
        "method_declaration": Rule("method", key=_JAVA_PARAMS),
        "constructor_declaration": Rule("constructor", key=_JAVA_PARAMS),
        "compact_constructor_declaration": Rule("constructor"),
    },
    transparent=frozenset({"enum_body_declarations"}),
    imports=frozenset({"import_declaration"}),
    test_mark=re.compile(r"@(Test|ParameterizedTest|RepeatedTest|TestFactory)\b"),
    skip_mark=re.compile(r"@(Disabled|Ignore)\b"),
))
_add(Lang(
    "csharp",
    rules={
        "class_declaration": Rule("class", container=True),
        "struct_declaration": Rule("struct", container=True),
        "interface_declaration": Rule("interface", container=True),
        "enum_declaration": Rule("enum", container=True),
        "record_declaration": Rule("record", container=True),
        "record_struct_declaration": Rule("record", container=True),
        "method_declaration": Rule("method", key=_CS_PARAMS),
        "constructor_declaration": Rule("constructor", key=_CS_PARAMS),
        "destructor_declaration": Rule("destructor"),
        "property_declaration": Rule("property", body=lambda n: n.child_by_field_name("accessors")),
    },
    transparent=frozenset({"namespace_declaration", "file_scoped_namespace_declaration",
                           "declaration_list"}),
    imports=frozenset({"using_directive"}),
    test_mark=re.compile(r"\[\s*(Test|Fact|Theory|TestMethod|TestCase|DataTestMethod)\b"),
    skip_mark=re.compile(r"\[\s*Ignore\b|\bSkip\s*="),
))
_add(Lang(
    "c",
    rules={"function_definition": Rule("function", name=_C_NAME), **_C_TYPES},
    transparent=frozenset({"preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif",
                           "preproc_elifdef", "linkage_specification", "declaration_list"}),
    imports=frozenset({"preproc_include"}),
))
_add(Lang(
    "cpp",
    rules={
        "function_definition": Rule("fn", name=_C_NAME, owner=_C_OWNER, key=_c_param_key),
        "class_specifier": Rule("class", container=True, needs_body=True),
        **_C_TYPES,
    },
    wrappers={"template_declaration": _last_named},
    transparent=frozenset({"preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif",
                           "preproc_elifdef", "linkage_specification", "namespace_definition",
                           "declaration_list"}),
    imports=frozenset({"preproc_include", "using_declaration"}),
))
_add(Lang(
    "ruby",
    rules={
        "module": Rule("module", container=True),
        "class": Rule("class", container=True),
        "method": Rule("fn"),
        "singleton_method": Rule("method", key=lambda n, s: "[self]"),
    },
    transparent=frozenset({"body_statement"}),
    test_name=re.compile(r"^test_"),
))
_add(Lang(
    "php",
    rules={
        "class_declaration": Rule("class", container=True),
        "interface_declaration": Rule("interface", container=True),
        "trait_declaration": Rule("trait", container=True),
        "enum_declaration": Rule("enum", container=True),
        "method_declaration": Rule("method"),
        "function_definition": Rule("function"),
    },
    transparent=frozenset({"namespace_definition", "compound_statement"}),
    imports=frozenset({"namespace_use_declaration"}),
    test_name=re.compile(r"^test"),
    test_mark=re.compile(r"#\[\s*Test\b"),
))
_add(Lang(
    "kotlin",
    rules={
        "class_declaration": Rule(
            "class", name=first_child_text("type_identifier"), body=_kotlin_body, container=True),
        "object_declaration": Rule(
            "object", name=first_child_text("type_identifier"), body=_kotlin_body, container=True),
        "companion_object": Rule(
            "object", name=lambda n, s: first_child_text("type_identifier")(n, s) or "Companion",
            body=_kotlin_body, container=True),
        "function_declaration": Rule(
            "fn", name=first_child_text("simple_identifier"), body=_kotlin_body, key=_KT_PARAMS),
        "secondary_constructor": Rule("constructor", name=lambda n, s: "constructor",
                                      body=lambda n: n.child_by_field_name("body") or next(
                                          (c for c in n.named_children if c.type == "statements"),
                                          None)),
    },
    imports=frozenset({"import_list", "import_header"}),
    test_mark=re.compile(r"@(Test|ParameterizedTest)\b"),
    skip_mark=re.compile(r"@(Disabled|Ignore)\b"),
))
_add(Lang(
    "swift",
    rules={
        "class_declaration": Rule("class", name=_swift_name, container=True),
        "protocol_declaration": Rule("protocol", container=True),
        "function_declaration": Rule("fn", key=_swift_param_key),
        "init_declaration": Rule("constructor", name=lambda n, s: "init", key=_swift_param_key),
        "deinit_declaration": Rule("destructor", name=lambda n, s: "deinit"),
    },
    imports=frozenset({"import_declaration"}),
    test_name=re.compile(r"^test"),
))
_add(Lang(
    "scala",
    rules={
        "class_definition": Rule("class", container=True),
        "object_definition": Rule("object", container=True),
        "trait_definition": Rule("trait", container=True),
        "enum_definition": Rule("enum", container=True),
        "function_definition": Rule("fn", key=_SCALA_PARAMS),
        "function_declaration": Rule("fn", key=_SCALA_PARAMS),
    },
    imports=frozenset({"import_declaration"}),
    test_mark=re.compile(r"@Test\b"),
    skip_mark=re.compile(r"@(Disabled|Ignore)\b"),
))

# Go's type specs and Swift's classes tell their kind by their content.
KIND_OF = {
    ("go", "type_spec"): _go_type_kind,
    ("kotlin", "class_declaration"): _kotlin_class_kind,
    ("swift", "class_declaration"): _swift_kind,
}
