"""The three demo agents started by ``switchboard serve --demo``: currency, translate, caption.

Each is a real A2A agent on its own port (see :mod:`seeds.demo_server`), with one skill:

- ``currency`` (A2A 1.0 and 0.3): converts amounts with a fixed demo rate table (not live).
- ``translate`` (A2A 0.3 only): word-by-word English to French, Spanish or German.
- ``caption`` (A2A 1.0 and 0.3): names the format, size and byte count of a PNG, JPEG or GIF.

The 1.0 agents also serve 0.3 on the same URL, as a2a-sdk 1.3 agents do in 0.3-compat mode.

``seeds/demo.toml`` lists them on their default ports for the registry to crawl;
``switchboard serve --demo`` runs them on free ports and registers their actual URLs.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Any

from seeds.demo_server import DemoAgent, Part, ReplyResult, Version

__all__ = [
    "DEMO_PORTS",
    "DemoAgents",
    "build_demo_agents",
    "caption_card",
    "caption_reply",
    "currency_card",
    "currency_reply",
    "describe_image",
    "start_demo_agents",
    "translate_card",
    "translate_reply",
]

DEMO_PORTS: dict[str, int] = {"currency": 9101, "translate": 9102, "caption": 9103}
PROVIDER = "Switchboard demo"
V1_VERSIONS: tuple[Version, ...] = ("1.0", "0.3")  # what currency and caption serve


def _provider(base_url: str) -> dict[str, str]:
    return {"organization": PROVIDER, "url": base_url}


def _v1_card(base_url: str, **fields: Any) -> dict[str, Any]:
    """A 1.0 card with 0.3 compat, as the 1.3 SDK serves it (field order included).

    JSON-RPC at ``base_url/`` for both versions, streaming; the 0.3 fields the SDK adds in
    compat mode (``url``, ``preferredTransport``, ``protocolVersion``) come last.
    """
    url = f"{base_url}/"
    interfaces = [
        {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": version}
        for version in V1_VERSIONS
    ]
    return {
        "name": fields.pop("name"),
        "description": fields.pop("description"),
        "supportedInterfaces": interfaces,
        "provider": _provider(base_url),
        "version": "1.0.0",
        "capabilities": {"streaming": True},
        **fields,
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3",
        "url": url,
    }


# --- currency ------------------------------------------------------------------------------------

# Units of each currency per 1 USD. Fixed demo values, not market data.
RATES: dict[str, float] = {
    "USD": 1.0,
    "EUR": 0.92,
    "GBP": 0.79,
    "JPY": 150.0,
    "CHF": 0.88,
    "CAD": 1.36,
    "AUD": 1.52,
    "CNY": 7.2,
    "INR": 83.0,
}
_CONVERT = re.compile(
    r"(?P<amount>\d[\d,]*(?:\.\d+)?)\s*(?P<src>[a-z]{3})\s+(?:to|in|into|as)\s+(?P<dst>[a-z]{3})\b",
    re.IGNORECASE,
)
_KNOWN = ", ".join(RATES)


def currency_card(base_url: str) -> dict[str, Any]:
    """The currency agent's A2A 1.0 card (with its 0.3 compat interface)."""
    modes = ["text/plain", "application/json"]
    skill = {
        "id": "convert-currency",
        "name": "Convert currency",
        "description": f"Converts an amount between {_KNOWN} using fixed demo rates.",
        "tags": ["currency", "finance", "exchange-rates"],
        "examples": ["convert 100 USD to EUR", "how much is 250 GBP in JPY?"],
        "inputModes": modes,
        "outputModes": modes,
    }
    return _v1_card(
        base_url,
        name="Currency converter",
        description="Converts money amounts with a fixed demo rate table (not live rates).",
        defaultInputModes=modes,
        defaultOutputModes=modes,
        skills=[skill],
    )


def _data_conversion(data: Any) -> tuple[float, str, str] | None:
    if not isinstance(data, dict):
        return None
    amount, src, dst = data.get("amount"), data.get("from"), data.get("to")
    if isinstance(amount, bool) or not isinstance(amount, int | float):
        return None
    if not (isinstance(src, str) and isinstance(dst, str)):
        return None
    return float(amount), src.upper(), dst.upper()


def _conversion_request(text: str, parts: list[Part]) -> tuple[float, str, str] | None:
    for part in parts:
        found = _data_conversion(part.get("data")) if part["kind"] == "data" else None
        if found is not None:
            return found
    match = _CONVERT.search(text)
    if match is None:
        return None
    return float(match["amount"].replace(",", "")), match["src"].upper(), match["dst"].upper()


def _format_amount(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") if value != int(value) else str(int(value))


def currency_reply(text: str, parts: list[Part]) -> ReplyResult:
    """Convert "100 USD to EUR" (or a data part ``{"amount", "from", "to"}``)."""
    request = _conversion_request(text, parts)
    if request is None:
        return ReplyResult.ask(
            "Please give an amount and two currencies, for example: convert 100 USD to EUR. "
            f"I know {_KNOWN}."
        )
    amount, src, dst = request
    unknown = [code for code in (src, dst) if code not in RATES]
    if unknown:
        return ReplyResult.ask(f"I don't know {' or '.join(unknown)}. I know {_KNOWN}.")
    if not 0 <= amount < 1e15:
        return ReplyResult.ask("Please give an amount between 0 and 1e15.")
    rate = RATES[dst] / RATES[src]
    result = round(amount * rate, 2)
    answer = f"{_format_amount(amount)} {src} = {result:.2f} {dst} (fixed demo rate {rate:.4f})"
    data = {"amount": amount, "from": src, "to": dst, "rate": round(rate, 6), "result": result}
    return ReplyResult(text=answer, data=data)


# --- translate -----------------------------------------------------------------------------------

LANGUAGES: dict[str, str] = {"fr": "French", "es": "Spanish", "de": "German"}
_LANGUAGE_NAMES: dict[str, str] = {
    "french": "fr",
    "fr": "fr",
    "francais": "fr",
    "français": "fr",
    "spanish": "es",
    "es": "es",
    "espanol": "es",
    "español": "es",
    "german": "de",
    "de": "de",
    "deutsch": "de",
}
# English word or phrase -> (French, Spanish, German). Phrases are matched before words.
DICTIONARY: dict[str, tuple[str, str, str]] = {
    "good morning": ("bonjour", "buenos días", "guten Morgen"),
    "good night": ("bonne nuit", "buenas noches", "gute Nacht"),
    "thank you": ("merci", "gracias", "danke"),
    "how are you": ("comment allez-vous", "cómo estás", "wie geht es dir"),
    "hello": ("bonjour", "hola", "hallo"),
    "goodbye": ("au revoir", "adiós", "auf Wiedersehen"),
    "world": ("monde", "mundo", "Welt"),
    "friend": ("ami", "amigo", "Freund"),
    "cat": ("chat", "gato", "Katze"),
    "dog": ("chien", "perro", "Hund"),
    "house": ("maison", "casa", "Haus"),
    "water": ("eau", "agua", "Wasser"),
    "bread": ("pain", "pan", "Brot"),
    "coffee": ("café", "café", "Kaffee"),
    "book": ("livre", "libro", "Buch"),
    "love": ("amour", "amor", "Liebe"),
    "yes": ("oui", "sí", "ja"),
    "no": ("non", "no", "nein"),
    "please": ("s'il vous plaît", "por favor", "bitte"),
    "the": ("le", "el", "der"),
    "a": ("un", "un", "ein"),
    "and": ("et", "y", "und"),
    "is": ("est", "es", "ist"),
    "my": ("mon", "mi", "mein"),
    "good": ("bon", "bueno", "gut"),
    "big": ("grand", "grande", "groß"),
    "small": ("petit", "pequeño", "klein"),
}
_REQUEST = re.compile(
    r"^\s*(?:please\s+)?(?:translate\s+)?(?P<text>.+?)\s+(?:to|into|in)\s+(?P<lang>[^\s.!?]+)"
    r"\s*[.!?]?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_WORD = re.compile(r"[a-z']+", re.IGNORECASE)


def translate_card(base_url: str) -> dict[str, Any]:
    """The translate agent's A2A 0.3 card."""
    skill = {
        "id": "translate-text",
        "name": "Translate text",
        "description": "Translates short English text word by word into French, Spanish or "
        "German with a small built-in dictionary; unknown words are kept as they are.",
        "tags": ["translation", "language", "text"],
        "examples": ["translate hello world to french", "translate good morning into Spanish"],
        "inputModes": ["text/plain"],
        "outputModes": ["text/plain"],
    }
    return {
        "name": "Word translator",
        "description": "Word-by-word English to French, Spanish or German (demo dictionary).",
        "url": f"{base_url}/",
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3.0",
        "provider": _provider(base_url),
        "version": "1.0.0",
        "capabilities": {"streaming": True},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [skill],
    }


def _translate(text: str, language: str) -> tuple[str, list[str]]:
    """Translate word by word, longest dictionary phrase first; also return unknown words."""
    column = list(LANGUAGES).index(language)
    words = _WORD.findall(text.lower())
    out: list[str] = []
    unknown: list[str] = []
    index = 0
    while index < len(words):
        for size in (3, 2, 1):
            found = DICTIONARY.get(" ".join(words[index : index + size]))
            if found is not None:
                out.append(found[column])
                index += size
                break
        else:
            out.append(words[index])
            unknown.append(words[index])
            index += 1
    return " ".join(out), unknown


def _translation_request(text: str, parts: list[Part]) -> tuple[str | None, str | None]:
    for part in parts:
        data = part.get("data") if part["kind"] == "data" else None
        if isinstance(data, dict) and isinstance(data.get("text"), str):
            to = data.get("to")
            return data["text"], to if isinstance(to, str) else None
    match = _REQUEST.match(text)
    if match is None:
        stripped = re.sub(r"^\s*(?:please\s+)?translate\s*", "", text, flags=re.IGNORECASE)
        return stripped.strip(" \"'") or None, None
    return match["text"].strip(" \"'"), match["lang"]


def translate_reply(text: str, parts: list[Part]) -> ReplyResult:
    """Translate "translate hello world to french" (or a data part ``{"text", "to"}``)."""
    source, target = _translation_request(text, parts)
    if not source:
        return ReplyResult.ask("What should I translate? For example: translate hello to French.")
    language = _LANGUAGE_NAMES.get((target or "").lower())
    if language is None:
        return ReplyResult.ask(
            f'Which language should I translate "{source}" into? '
            "I know French, Spanish and German, e.g. translate hello world to French."
        )
    translated, unknown = _translate(source, language)
    if unknown:
        translated += f" (not in my dictionary: {', '.join(unknown)})"
    return ReplyResult(text=translated)


# --- caption -------------------------------------------------------------------------------------

_JPEG_FRAMES = set(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def caption_card(base_url: str) -> dict[str, Any]:
    """The caption agent's A2A 1.0 card (with its 0.3 compat interface)."""
    skill = {
        "id": "caption-image",
        "name": "Caption image",
        "description": "Describes an image file by format, pixel size and byte count "
        "(PNG, JPEG, GIF). It does not look at the picture's content.",
        "tags": ["image", "vision", "caption"],
        "examples": ["describe this image", "what size is this picture?"],
        "inputModes": ["image/*"],
        "outputModes": ["text/plain"],
    }
    return _v1_card(
        base_url,
        name="Image captioner",
        description="Tells the format, dimensions and size of a PNG, JPEG or GIF image.",
        defaultInputModes=["image/*"],
        defaultOutputModes=["text/plain"],
        skills=[skill],
    )


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    index = 2
    while index + 4 <= len(data):
        if data[index] != 0xFF:
            return None
        marker = data[index + 1]
        if marker == 0xFF:  # fill byte
            index += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD8:  # markers without a length
            index += 2
            continue
        if marker in (0xD9, 0xDA):  # end of image / start of scan before any frame header
            return None
        (length,) = struct.unpack(">H", data[index + 2 : index + 4])
        if marker in _JPEG_FRAMES and index + 9 <= len(data):
            height, width = struct.unpack(">HH", data[index + 5 : index + 9])
            return width, height
        index += 2 + length
    return None


def describe_image(data: bytes) -> tuple[str, int, int] | None:
    """``(format, width, height)`` read from a PNG, GIF or JPEG header, else ``None``."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return "PNG", width, height
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return "GIF", width, height
    if data.startswith(b"\xff\xd8"):
        size = _jpeg_size(data)
        return ("JPEG", *size) if size else None
    return None


def caption_reply(text: str, parts: list[Part]) -> ReplyResult:
    """Describe each image file part: "A 64x48 PNG image (1234 bytes)"."""
    files = [p for p in parts if p["kind"] == "file"]
    if not files:
        return ReplyResult.ask("Please send an image (PNG, JPEG or GIF) as a file part.")
    if all(p["bytes"] is None for p in files):
        return ReplyResult.ask("I don't fetch URLs; please send the image bytes in the file part.")
    lines = []
    for part in files:
        info = describe_image(part["bytes"]) if part["bytes"] is not None else None
        if info is not None:
            kind, width, height = info
            lines.append(f"A {width}x{height} {kind} image ({len(part['bytes'])} bytes)")
    if not lines:
        return ReplyResult.ask("That is not a PNG, JPEG or GIF image; please send one of those.")
    return ReplyResult(text="\n".join(lines))


# --- running them --------------------------------------------------------------------------------


def build_demo_agents(*, chunk_delay: float = 0.0) -> dict[str, DemoAgent]:
    """The three demo agents, not yet started."""
    return {
        "currency": DemoAgent(
            "currency",
            V1_VERSIONS,
            currency_card,
            currency_reply,
            chunk_delay=chunk_delay,
            working_text="Converting...",
        ),
        "translate": DemoAgent(
            "translate",
            "0.3",
            translate_card,
            translate_reply,
            chunk_delay=chunk_delay,
            working_text="Translating...",
        ),
        "caption": DemoAgent(
            "caption",
            V1_VERSIONS,
            caption_card,
            caption_reply,
            chunk_delay=chunk_delay,
            working_text="Reading the image header...",
        ),
    }


@dataclass
class DemoAgents:
    """Running demo agents by name; ``urls`` maps each name to its base URL."""

    agents: dict[str, DemoAgent] = field(default_factory=dict)

    @property
    def urls(self) -> dict[str, str]:
        """Base URLs (``http://host:port``) of the running agents."""
        return {name: agent.base_url for name, agent in self.agents.items() if agent.base_url}

    async def close(self) -> None:
        """Stop every agent."""
        for agent in self.agents.values():
            await agent.close()

    async def __aenter__(self) -> DemoAgents:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


async def start_demo_agents(
    host: str = "127.0.0.1",
    ports: dict[str, int] | None = None,
    *,
    chunk_delay: float = 0.0,
) -> DemoAgents:
    """Start the three demo agents on ``host``; ``ports`` overrides :data:`DEMO_PORTS`.

    A port of 0 picks a free one. ``chunk_delay`` slows each streamed step (seconds).
    """
    wanted = DEMO_PORTS | (ports or {})
    unknown = wanted.keys() - DEMO_PORTS.keys()
    if unknown:
        raise ValueError(f"unknown demo agents: {sorted(unknown)}; known: {sorted(DEMO_PORTS)}")
    running = DemoAgents()
    try:
        for name, agent in build_demo_agents(chunk_delay=chunk_delay).items():
            await agent.start(host, wanted[name])
            running.agents[name] = agent
    except BaseException:
        await running.close()
        raise
    return running
