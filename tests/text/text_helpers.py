"""What the text layer's tests share: hostile texts that every round trip must survive."""

from __future__ import annotations

# hostile texts: every round trip must give them back exactly
HOSTILE = {
    "empty": "",
    "spaces": "   ",
    "only-newlines": "\n\n\r\n",
    "crlf": "A man runs.\r\nA woman walks.\r\n",
    "bom": "\ufeffThe dog sits. The cat runs.",
    "no-final-newline": "First line.\nSecond line. Third sentence",
    "blank-lines": "One paragraph. Two.\n\n\nAnother paragraph.\n",
    "indented": "  - item one.\n\t- item two.  \n    code();",
    "emoji": "I love it 😀. Really 👍🏽! 👨‍👩‍👧 family.",
    "rtl": "שלום עולם. מה שלומך? مرحبا بالعالم. كيف حالك؟",
    "mixed-breaks": "a\rb\x0bc\x0cd\u2028e\u2029f\x85g",
    "long": "word, " * 400 + "x" * 1000 + " more words" * 100,
}
