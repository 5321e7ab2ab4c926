"""The web console in a real headless Chromium (Debian's ``chromium`` and ``chromedriver``,
driven by Selenium) against a live Switchboard with the demo agents and a hostile card.

Run alone with ``pytest -m browser``. Screenshots of each page go to
``$SWITCHBOARD_UI_ARTIFACTS`` (default: a temporary directory); they are not committed.
Without Chromium (or Selenium) the tests skip and say why.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

from router.app import create_app
from router.ui.routes import CSP
from seeds.demo_agents import DEMO_PORTS, DemoAgents, start_demo_agents
from tests.support.helpers import ADMIN, AUTH, make_settings

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.xdist_group("browser")]

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the test extra")
if not (Path(CHROMIUM).exists() and Path(DRIVER).exists()):
    pytest.skip(
        f"{CHROMIUM} and {DRIVER} are needed (apt-get install chromium chromium-driver)",
        allow_module_level=True,
    )

from selenium.common.exceptions import TimeoutException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

BIDI = "\u202e\u2067\u200f"
HUGE = "\u202eWIDE" + "W" * 16_000  # as long as a card's description may be, no space in it
HUNDRED_KB = "\u202e" + "<script>window.__pwned=11</script>" + "W" * 100_000
HOSTILE_NAME = '<img src=x onerror="window.__pwned=1">Hostile <script>window.__pwned=2</script>'


def hostile_card(description: str = HUGE, extra_skill: bool = False) -> dict[str, Any]:
    """A card whose every text tries to run a script or break the layout."""
    skills = [
        {
            "id": "hostile-skill",
            "name": f"<b onmouseover='window.__pwned=6'>bold</b> {BIDI}reversed",
            "description": f"<iframe src=javascript:window.__pwned=7></iframe>{HUGE}",
            "tags": ["<svg onload=window.__pwned=8>", f"{BIDI}tag", "zzz-hostile"],
            "examples": ["</pre><script>window.__pwned=9</script>", "x" * 4000],
        }
    ]
    if extra_skill:
        skills.append({"id": "second", "name": "Second", "description": "d", "tags": ["zzz"]})
    return {
        "name": HOSTILE_NAME,
        "description": description,
        "version": "1",
        "documentationUrl": "javascript:window.__pwned=3",
        "iconUrl": "javascript:window.__pwned=10",
        "provider": {"organization": "<script>window.__pwned=4</script>", "url": "javascript:x"},
        "supportedInterfaces": [
            {
                "url": "http://127.0.0.1:9/a2a",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            }
        ],
        "capabilities": {},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
        "x-hostile-notes": HUNDRED_KB,  # a field Switchboard does not know: kept, shown raw
    }


class Live:
    """A Switchboard and the demo agents on 127.0.0.1 (free ports), served by an event loop
    of their own in a thread, so that the blocking WebDriver calls cannot stall them."""

    def __init__(self, database_url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.database_url = database_url
        self.base = ""
        self.demo: DemoAgents | None = None
        self.runner: web.AppRunner | None = None

    def run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=60)

    async def start(self) -> None:
        self.demo = await start_demo_agents(ports=dict.fromkeys(DEMO_PORTS, 0))
        self.runner = web.AppRunner(create_app(make_settings(self.database_url)))
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = self.runner.addresses[0][1]
        self.base = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
        if self.demo is not None:
            await self.demo.close()

    def close(self) -> None:
        self.run(self.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """Switchboard with currency and caption registered (translate is left for the admin
    test to register) and the hostile card pushed, then changed (a revision with a diff)."""
    db = tmp_path_factory.mktemp("console") / "switchboard.db"
    server = Live(f"sqlite:///{db}")
    server.run(server.start())
    try:
        assert server.demo is not None
        with httpx.Client(base_url=server.base, headers=AUTH, timeout=30) as http:
            for name in ("currency", "caption", "translate"):  # the demo agents sign their cards
                jwks = server.demo.urls[name] + "/.well-known/jwks.json"
                resp = http.post("/api/v1/keys", json={"jwks_url": jwks})
                assert resp.status_code == 201, resp.text
            for name in ("currency", "caption"):
                resp = http.post("/api/v1/agents", json={"url": server.demo.urls[name], "id": name})
                assert resp.status_code == 201, resp.text
            resp = http.post("/api/v1/agents", json={"card": hostile_card(), "id": "hostile"})
            assert resp.status_code == 201, resp.text
            changed = hostile_card(description=f"changed {HUGE}", extra_skill=True)
            resp = http.put("/api/v1/agents/hostile/card", json=changed)
            assert resp.status_code == 200, resp.text
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def artifacts() -> Path:
    """Where the screenshots go."""
    path = Path(os.environ.get("SWITCHBOARD_UI_ARTIFACTS") or tempfile.mkdtemp(prefix="sb-ui-"))
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium; its console log is read by each test."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.add_argument("--window-size=1280,900")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=DRIVER)
    driver = webdriver.Chrome(service=service, options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def page(browser: Any, live: Live, artifacts: Path, request: pytest.FixtureRequest) -> Any:
    """The browser, signed out, at a blank page; after the test: no console error, no script
    from card text ran, and a screenshot of where the test ended."""
    browser.set_window_size(1280, 900)
    browser.get(f"{live.base}/ui/overview")
    browser.execute_script("sessionStorage.clear()")
    browser.get_log("browser")  # drop what came before
    yield browser
    browser.save_screenshot(str(artifacts / f"{request.node.name}.png"))
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
    assert browser.execute_script("return window.__pwned === undefined")


def wait(browser: Any, condition: Any, timeout: float = 15) -> Any:
    return WebDriverWait(browser, timeout).until(condition)


def text_in(selector: str, text: str) -> Any:
    return ec.text_to_be_present_in_element((By.CSS_SELECTOR, selector), text)


def no_horizontal_scroll(browser: Any) -> bool:
    return browser.execute_script(
        "return document.documentElement.scrollWidth <= window.innerWidth + 1"
    )


def test_root_redirects_a_browser_and_the_page_has_its_csp(page: Any, live: Live) -> None:
    page.get(f"{live.base}/")
    wait(page, ec.url_to_be(f"{live.base}/ui/"))
    wait(page, text_in("main", "Currency converter"))
    with httpx.Client() as http:
        assert http.get(f"{live.base}/ui/").headers["Content-Security-Policy"] == CSP


def test_search_and_filters_are_in_the_url(page: Any, live: Live, artifacts: Path) -> None:
    page.get(f"{live.base}/ui/")
    box = wait(page, ec.element_to_be_clickable((By.ID, "f-q")))
    box.send_keys("convert money")
    box.submit()
    wait(page, ec.url_contains("q=convert+money"))
    wait(page, text_in(".results", "Currency converter"))
    assert "Image captioner" not in page.find_element(By.CSS_SELECTOR, ".results").text
    # the API's default mode: this server's matcher goes by words
    assert page.find_element(By.CSS_SELECTOR, ".match-mode").text == "Found by words."
    assert "word score " in page.find_element(By.CSS_SELECTOR, ".results").text
    page.save_screenshot(str(artifacts / "catalog-search.png"))
    page.get(f"{live.base}/ui/")
    wait(page, text_in(".results", "Hostile"))
    page.find_element(By.CSS_SELECTOR, ".filters summary").click()
    Select(page.find_element(By.ID, "f-health")).select_by_value("unknown")
    page.find_element(By.ID, "f-tag").send_keys("zzz-hostile")
    page.find_element(By.CSS_SELECTOR, "form.search button[type=submit]").click()
    wait(page, ec.url_contains("health=unknown"))
    assert "tag=zzz-hostile" in page.current_url
    wait(page, text_in(".results", "1 agent on this page"))
    results = page.find_element(By.CSS_SELECTOR, ".results").text
    assert "Hostile" in results and "Currency converter" not in results
    # the shared URL opens the same search
    page.get(f"{live.base}/ui/?tag=currency")
    wait(page, text_in(".results", "Currency converter"))
    assert page.find_element(By.ID, "f-tag").get_attribute("value") == "currency"


def test_hostile_card_is_text_and_the_layout_holds(page: Any, live: Live, artifacts: Path) -> None:
    for width, name in ((1280, "laptop"), (390, "phone")):
        page.set_window_size(width, 900)
        page.get(f"{live.base}/ui/")
        wait(page, text_in(".results", "Hostile"))
        assert no_horizontal_scroll(page), f"catalog overflows at {width}px"
        page.save_screenshot(str(artifacts / f"catalog-hostile-{name}.png"))
        page.get(f"{live.base}/ui/agents/hostile")
        wait(page, text_in("h1", "Hostile"))
        assert HUGE in page.find_element(By.CSS_SELECTOR, "main .desc").text
        assert page.find_element(By.CSS_SELECTOR, "h1").text == HOSTILE_NAME
        page.find_element(By.CSS_SELECTOR, "details.raw summary").click()
        wait(page, text_in("details.raw pre", "x-hostile-notes"))
        assert no_horizontal_scroll(page), f"agent page overflows at {width}px"
        page.save_screenshot(str(artifacts / f"agent-hostile-{name}.png"))
    assert page.find_elements(By.CSS_SELECTOR, "main img, main script, main iframe, main svg") == []
    hrefs = [a.get_attribute("href") or "" for a in page.find_elements(By.CSS_SELECTOR, "a")]
    assert not any(h.startswith("javascript:") for h in hrefs), hrefs


def test_agent_page_shows_the_card_and_a_revision_diff(page: Any, live: Live) -> None:
    page.get(f"{live.base}/ui/agents/hostile")
    wait(page, text_in("#h-revisions + * , .revisions", "registered"))
    diff = page.find_element(By.CSS_SELECTOR, "table.diff")
    rows = {
        r.find_element(By.TAG_NAME, "th").text: r.find_elements(By.TAG_NAME, "td")
        for r in diff.find_elements(By.CSS_SELECTOR, "tbody tr")
    }
    assert "description" in rows and rows["description"][1].text.startswith("changed")
    assert rows["skills"][1].text == "second" and rows["skills"][0].text == "none"
    page.get(f"{live.base}/ui/agents/currency")
    wait(page, text_in("h1", "Currency converter"))
    main = page.find_element(By.TAG_NAME, "main").text
    assert "convert 100 USD to EUR" in main  # a skill's example
    assert f"{live.base}/agents/currency" in main  # the router URL in the snippets
    assert "verified" in main and "healthy" in main  # its card is signed and trusted
    page.find_element(By.CSS_SELECTOR, "details.raw summary").click()
    raw = page.find_element(By.CSS_SELECTOR, "details.raw pre").text
    assert '"supportedInterfaces"' in raw
    # would a message reach it: explain, in the playground's terms, its own skills' rows
    page.find_element(By.CSS_SELECTOR, "form.reach textarea").send_keys("convert 100 USD to EUR")
    page.find_element(By.CSS_SELECTOR, "form.reach button[type=submit]").click()
    wait(page, ec.presence_of_element_located((By.CSS_SELECTOR, "form.reach ~ div a.chosen")))
    line = page.find_element(By.CSS_SELECTOR, "form.reach ~ div p.threshold").text
    assert line.startswith("Threshold 0.500 (the default of matching by words")
    assert "Method: SendStreamingMessage." in line
    rows = page.find_elements(By.CSS_SELECTOR, "form.reach ~ div table.candidates tbody tr")
    assert [r.find_element(By.TAG_NAME, "td").text for r in rows] == ["currency"]


def test_playground_explains_and_routes_for_real(page: Any, live: Live, artifacts: Path) -> None:
    page.get(f"{live.base}/ui/playground")
    box = wait(page, ec.element_to_be_clickable((By.ID, "f-message")))
    box.send_keys("convert 100 USD to EUR")
    page.find_element(By.CSS_SELECTOR, "form.playground button[type=submit]").click()
    wait(page, ec.presence_of_element_located((By.CSS_SELECTOR, "a.chosen")))
    assert page.find_element(By.CSS_SELECTOR, "a.chosen").text == "currency"
    assert page.find_element(By.CSS_SELECTOR, ".tier").text == "lexical"
    dropped = page.find_elements(By.CSS_SELECTOR, "table.candidates tr.dropped")
    assert any("image/*" in row.text for row in dropped)  # caption: why it was dropped
    # explained with the method it is then sent with, one threshold and where it comes from
    line = page.find_element(By.CSS_SELECTOR, "p.threshold").text
    assert line.startswith("Threshold 0.500 (the default of matching by words")
    assert "Method: SendStreamingMessage." in line
    page.find_element(By.XPATH, "//button[normalize-space()='Send it for real']").click()
    wait(page, ec.presence_of_element_located((By.CSS_SELECTOR, "section[data-done]")), 30)
    answer = page.find_element(By.CSS_SELECTOR, "output.answer").text
    assert "EUR" in answer and "92" in answer, answer
    assert "TASK_STATE_COMPLETED" in page.find_element(By.CSS_SELECTOR, "ol.events").text
    page.save_screenshot(str(artifacts / "playground.png"))


def test_admin_registers_refreshes_and_deletes(page: Any, live: Live, artifacts: Path) -> None:
    assert live.demo is not None
    page.get(f"{live.base}/ui/admin")
    wait(page, text_in("main", "Sign in with an admin credential"))
    page.find_element(By.ID, "credential").send_keys(ADMIN)
    page.find_element(By.CSS_SELECTOR, "form.signin button").click()
    wait(page, text_in(".session", "admin"))
    url = wait(page, ec.element_to_be_clickable((By.ID, "f-url")))
    url.send_keys(live.demo.urls["translate"])
    page.find_element(By.CSS_SELECTOR, "form.register button[type=submit]").click()
    wait(page, text_in(".status", "Registered"))
    row = '[data-agent="word-translator"]'
    wait(page, ec.presence_of_element_located((By.CSS_SELECTOR, row)))
    page.find_element(By.CSS_SELECTOR, f'{row} button[aria-label^="Refresh"]').click()
    wait(page, text_in(".status", "Refreshed word-translator"))
    page.find_element(By.CSS_SELECTOR, f'{row} button[aria-label^="Delete"]').click()
    page.find_element(By.CSS_SELECTOR, f'{row} button[aria-label^="Really delete"]').click()
    wait(page, text_in(".status", "Deleted word-translator"))
    page.save_screenshot(str(artifacts / "admin.png"))
    with httpx.Client(base_url=live.base) as http:
        assert http.get("/api/v1/agents/word-translator").status_code == 404
    assert page.execute_script("return document.cookie") == ""
    token_in_url = ADMIN in page.current_url
    assert not token_in_url


def test_overview_and_skills_pages(page: Any, live: Live, artifacts: Path) -> None:
    page.get(f"{live.base}/ui/overview")
    wait(page, text_in("main", "No agent failed its last check"))
    main = page.find_element(By.TAG_NAME, "main").text
    assert "Health" in main and "Signatures" in main and "healthy" in main
    page.save_screenshot(str(artifacts / "overview.png"))
    page.get(f"{live.base}/ui/skills")
    wait(page, text_in("main", "By tag"))
    assert "Convert currency" in page.find_element(By.TAG_NAME, "main").text
    page.save_screenshot(str(artifacts / "skills.png"))


def test_keyboard_reaches_the_search(page: Any, live: Live) -> None:
    page.get(f"{live.base}/ui/")
    wait(page, text_in(".results", "Currency converter"))
    try:
        page.find_element(By.TAG_NAME, "body").send_keys("\t")
        wait(page, lambda d: d.switch_to.active_element.text == "Skip to content", 5)
    except TimeoutException:
        pytest.fail("the first Tab does not reach the skip link")
