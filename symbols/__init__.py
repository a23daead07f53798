"""lonca.symbols: source bytes -> symbol tables; two trees -> the facts of a change.

Pure: bytes in, values out. No sockets, no database, no git, nothing else of Lonca.
"""
from .cache import SymbolCache
from .claims import CLAIM_FIELDS, compare_claim
from .facts import MAX_AFFECTED, Facts, compute_facts
from .languages import EXTENSIONS, SECTION_LANGUAGES, language_of
from .parsing import MAX_FILE_BYTES
from .mentions import warm_base
from .table import SYMBOLS_ENGINE, FileSymbols, Symbol, symbol_table
from .trees import TreeEntry, mode_word

__all__ = [
    "CLAIM_FIELDS", "EXTENSIONS", "MAX_AFFECTED", "MAX_FILE_BYTES", "SECTION_LANGUAGES",
    "SYMBOLS_ENGINE", "Facts", "FileSymbols", "Symbol", "SymbolCache", "TreeEntry",
    "compare_claim", "compute_facts", "language_of", "mode_word", "symbol_table", "warm_base",
]
