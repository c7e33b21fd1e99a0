"""The grammar corpus for cera's mask tests and benchmark: hand-written GBNF grammars (JSON-like,
nested, enums, recursion, Unicode classes, repetition counts) plus seeded generated ones shaped
like JSON-Schema objects. reference_masks.py writes them to tests/fixtures/grammar/corpus.gbnf.
"""

import random

JSON_STRING = r'"\"" ( [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} ) )* "\""'
JSON_NUMBER = r'"-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?'

HANDWRITTEN = {
    "json": r'''
root ::= value
value ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}"
array ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
string ::= ''' + JSON_STRING + r'''
number ::= ''' + JSON_NUMBER + r'''
ws ::= [ \t\n]{0,4}
''',
    "json_compact": r'''
root ::= object
value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ( string ":" value ( "," string ":" value )* )? "}"
array ::= "[" ( value ( "," value )* )? "]"
string ::= ''' + JSON_STRING + r'''
number ::= ''' + JSON_NUMBER + r'''
''',
    "person": r'''
root ::= "{" ws "\"name\"" ws ":" ws string ws "," ws "\"age\"" ws ":" ws int ( ws "," ws "\"email\"" ws ":" ws string )? ws "}"
string ::= "\"" [^"\\\x00-\x1F]{0,24} "\""
int ::= "0" | [1-9] [0-9]{0,2}
ws ::= " "?
''',
    "int_array_counts": r'''
root ::= "[" int ( "," int ){0,4} "]"
int ::= "-"? [0-9]{1,3}
''',
    "enum_bare": r'''
root ::= "red" | "green" | "blue" | "cyan" | "magenta" | "yellow" | "black"
''',
    "enum_json": r'''
root ::= "{\"color\": " color ", \"size\": " size "}"
color ::= "\"red\"" | "\"green\"" | "\"blue\""
size ::= "\"S\"" | "\"M\"" | "\"L\"" | "\"XL\""
''',
    "nested_arrays": r'''
root ::= arr
arr ::= "[" ( arr ( "," arr )* )? "]"
''',
    "parens": r'''
root ::= p
p ::= ( "(" p ")" | "[" p "]" | "{" p "}" )*
''',
    "arithmetic": r'''
root ::= expr
expr ::= term ( ( "+" | "-" ) term )*
term ::= factor ( ( "*" | "/" ) factor )*
factor ::= num | "(" expr ")" | "-" factor
num ::= [0-9]+ ( "." [0-9]+ )?
''',
    "greek": r'''
root ::= [α-ω]+ ( " " [α-ω]+ ){0,3}
''',
    "cjk": r'''
root ::= "名前: " [一-龥]{1,4} "\n"
''',
    "emoji": r'''
root ::= "mood " [😀-🙏]{1,3} ( " " [a-z]{1,8} )?
''',
    "non_ascii": r'''
root ::= [^\x00-\x7F]{1,6}
''',
    "latin_mixed": r'''
root ::= ( [a-zA-Zà-ÿ] | [Ā-ſ] )+ "."
''',
    "phone": r'''
root ::= "(" [0-9]{3} ") " [0-9]{3} "-" [0-9]{4}
''',
    "uuid": r'''
root ::= "\"" hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12} "\""
hex ::= [0-9a-f]
''',
    "date": r'''
root ::= year "-" month "-" day ( "T" [0-2] [0-9] ":" [0-5] [0-9] ":" [0-5] [0-9] "Z" )?
year ::= [12] [0-9]{3}
month ::= "0" [1-9] | "1" [0-2]
day ::= "0" [1-9] | [12] [0-9] | "3" [01]
''',
    "key_values": r'''
root ::= ( key "=" val "\n" ){1,4}
key ::= [a-z] [a-z_]{0,10}
val ::= [0-9]+ | "\"" [^"\n]* "\""
''',
    "csv": r'''
root ::= row ( "\n" row ){0,3} "\n"?
row ::= field ( "," field ){2}
field ::= [A-Za-z0-9 ]* | "\"" [^"]* "\""
''',
    "bool_list": r'''
root ::= "[" ( b ( ", " b )* )? "]"
b ::= "true" | "false" | "null"
''',
    "escaped_string": r'''
root ::= "\"" ( [^"\\] | "\\" ["\\nt] )* "\""
''',
    "identifiers": r'''
root ::= ident ( "." ident ){0,3}
ident ::= [a-zA-Z_] [a-zA-Z0-9_]*
''',
    "xml": r'''
root ::= "<note>" ws to ws body ws "</note>"
to ::= "<to>" text "</to>"
body ::= "<body>" text "</body>"
text ::= [^<&]{0,30}
ws ::= [ \n]*
''',
    "yes_no": r'''
root ::= ( "yes" | "no" ) ", because " [a-z ]{1,40} "."
''',
    "markdown_list": r'''
root ::= ( "- " [^\n]{1,30} "\n" ){1,3}
''',
    "function_call": r'''
root ::= name "(" ( arg ( ", " arg )* )? ")"
name ::= "get_weather" | "search" | "send_email"
arg ::= [a-z]+ "=" ( "\"" [^"]* "\"" | [0-9]+ )
''',
    "sql": r'''
root ::= "SELECT " cols " FROM " table ( " WHERE " cond )? ";"
cols ::= "*" | col ( ", " col )*
col ::= [a-z]+
table ::= "users" | "orders" | "items"
cond ::= col " " ( "=" | "<" | ">" ) " " [0-9]+
''',
    "nested_schema": r'''
root ::= "{" "\"items\":" "[" ( item ( "," item )* )? "]" "}"
item ::= "{" "\"id\":" int "," "\"tags\":" "[" ( str ( "," str ){0,2} )? "]" "}"
int ::= [1-9] [0-9]{0,5}
str ::= "\"" [a-z]{1,10} "\""
''',
    "email": r'''
root ::= local "@" domain
local ::= [a-z0-9._+-]+
domain ::= [a-z0-9-]+ ( "." [a-z0-9-]+ )+
''',
    "hex_color": r'''
root ::= "#" [0-9a-fA-F]{6} | "#" [0-9a-fA-F]{3}
''',
    "optional_chain": r'''
root ::= "a"? "b"? "c"? "d"? "end"
''',
    "nullable_star": r'''
root ::= ( "ab"? "c" )* "!"
''',
    "comments_multiline": r'''
# A grammar written over several lines, with comments.
root ::= ( greeting   # the greeting
         " "
         ( "world"
         | "there" )   # who
         "!" )

greeting ::= "hello" | "hi"   # short
''',
    "any_chars": r'''
root ::= "<" [^>\n]{1,8} ">"
''',
    "tree": r'''
root ::= node
node ::= "{\"v\":" [0-9] ( ",\"kids\":[" node ( "," node )* "]" )? "}"
''',
    "list_of_objects": r'''
root ::= "[" obj ( ", " obj ){0,2} "]"
obj ::= "{\"k\": \"" [a-z]{1,6} "\", \"n\": " [0-9]{1,4} "}"
''',
    "sentence": r'''
root ::= [A-Z] [a-z]* ( " " [a-z]+ ){0,6} ( "." | "!" | "?" )
''',
    "numbers_exp": r'''
root ::= num ( " " num ){0,3}
num ::= ''' + JSON_NUMBER + r'''
''',
    "tabs_newlines": r'''
root ::= ( "\t" [a-z]+ "\n" ){1,3}
''',
    "unicode_literal": r'''
root ::= "été " ( "A" | "😀" | [ÀÉ] ) "\n"
''',
    "dot_any": r'''
root ::= "[" .{0,6} "]" "\n"?
''',
    "ambiguous": r'''
root ::= a | b
a ::= "x"+ "y"
b ::= "x"+ "z" | "x" "x" "w"
''',
    "big_enum": 'root ::= "\\"" ( ' + " | ".join('"%s"' % w for w in (
        "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau "
        "upsilon phi chi psi omega apple apricot banana blueberry cherry date elder fig grape guava kiwi lemon "
        "lime mango melon nectarine orange papaya peach pear plum").split()) + ' ) "\\""\n',
    "nullable_refs": r'''
root ::= opt opt "x" opt
opt ::= "a"?
''',
    "unicode_string": r'''
root ::= "\"" [^"\\\x00-\x1F\x7F]{0,12} "\""
''',
    "deep_nesting": r'''
root ::= v
v ::= "[" ( v ( "," v )* )? "]" | "{\"a\":" v "}" | [0-9]
''',
}

WORDS = ("name age email id title price count tags items user city country zip score level status "
         "kind color size weight height note url date time flag code type value label").split()


def gen_schema_like(rng: random.Random, depth: int = 0) -> tuple:
    """An object rule body and the extra rules it needs, like a JSON-Schema conversion."""
    n = rng.randint(1, 4)
    keys = rng.sample(WORDS, n)
    parts = []
    rules = {}
    for i, k in enumerate(keys):
        kind = rng.choice(["string", "int", "number", "bool", "enum", "array", "object", "maxlen"]
                          if depth < 2 else ["string", "int", "bool", "enum", "maxlen"])
        if kind == "string":
            v = "string"
        elif kind == "int":
            v = "int"
        elif kind == "number":
            v = "number"
        elif kind == "bool":
            v = '( "true" | "false" )'
        elif kind == "enum":
            opts = rng.sample(WORDS, rng.randint(2, 5))
            v = "( " + " | ".join('"\\"%s\\""' % o for o in opts) + " )"
        elif kind == "maxlen":
            v = '"\\"" [^"\\\\\\x00-\\x1F]{%d,%d} "\\""' % (rng.randint(0, 2), rng.randint(3, 12))
        elif kind == "array":
            item = rng.choice(["string", "int", "number"])
            lo, hi = rng.randint(0, 1), rng.randint(2, 4)
            v = '"[" ws ( %s ( ws "," ws %s ){%d,%d} )%s ws "]"' % (item, item, lo, hi - 1, "" if lo else "?")
        else:
            name = "obj%d_%d" % (depth, i)
            body, sub = gen_schema_like(rng, depth + 1)
            rules.update(sub)
            rules[name] = body
            v = name
        kv = '"\\"%s\\"" ws ":" ws %s' % (k, v)
        optional = i > 0 and rng.random() < 0.3
        sep = 'ws "," ws ' if i > 0 else ""
        parts.append(("( %s%s )?" % (sep, kv)) if optional else (sep + kv))
    return '"{" ws ' + " ".join(parts) + ' ws "}"', rules


def generated(count: int, seed: int) -> dict:
    rng = random.Random(seed)
    out = {}
    for i in range(count):
        body, rules = gen_schema_like(rng)
        ws = rng.choice(['ws ::= ""', 'ws ::= " "?', 'ws ::= [ \\t\\n]{0,3}'])
        text = "root ::= " + body + "\n"
        for name, b in rules.items():
            text += "%s ::= %s\n" % (name, b)
        text += "string ::= " + JSON_STRING + "\n"
        text += "int ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,8} )\n"
        text += "number ::= " + JSON_NUMBER + "\n"
        text += ws + "\n"
        out["gen%02d" % i] = text
    return out


def corpus(seed: int = 20) -> dict:
    out = {k: v.strip() + "\n" for k, v in HANDWRITTEN.items()}
    out.update(generated(100 - len(out), seed))
    return out
