"""The docs page in a real browser (Chromium driven by Playwright).

    check_page.py BASE DEV_KEY WRONG_KEY SCREENSHOT

BASE is the server's address (http://127.0.0.1:PORT), DEV_KEY a valid
key, WRONG_KEY one the server does not know, SCREENSHOT where the picture
of the page goes (its operations, before any is opened). Run by
scripts/docs-browser, which starts the server and then checks that no
key reached its log. Fails (exit 1, naming what) unless:

- every operation of the served /v1/openapi.json is rendered (the ids
  read from the document itself, so a new operation is covered the day
  it exists), and getPet shows as deprecated;
- "Try it out" of listPets with DEV_KEY shows 200 and the rate-limit
  headers; with a wrong key, the 401 Error body;
- every request the page made went to BASE (all recorded);
- the console has no error but the browser's own note of the 401 asked
  for.
"""

import json
import sys
import urllib.request

from playwright.sync_api import expect, sync_playwright

# Headless Debian Chromium, offline: no first-run, sync, component
# updates or other background traffic of the browser's own, which the
# record of requests would otherwise have to tell apart from the page's.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
# Waits bound only a hang: each passes as soon as its element is there.
HANG = 60_000


def fail(message):
    print(f"docs-browser: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def operations(base):
    with urllib.request.urlopen(f"{base}/v1/openapi.json", timeout=30) as response:
        doc = json.load(response)
    ops = {}
    for item in doc["paths"].values():
        for method, op in item.items():
            if method in METHODS:
                ops[op["operationId"]] = op
    return ops


def operation_block(page, op_id):
    """The opblock of op_id (Swagger UI's id: operations-TAG-ID)."""
    return page.locator(f'.opblock[id$="-{op_id}"]')


def authorize(page, key):
    page.locator(".auth-wrapper button.authorize").click()
    dialog = page.locator(".modal-ux")
    logout = dialog.locator("button", has_text="Logout")
    if logout.count():
        logout.click()
    dialog.locator("input").first.fill(key)
    dialog.locator("button.modal-btn.auth.authorize").click()
    dialog.locator("button.btn-done").click()
    expect(dialog).to_have_count(0, timeout=HANG)


def execute(page, block):
    """Runs the tried-out operation; its live response."""
    before = block.locator(".live-responses-table").count()
    block.locator("button.execute").click()
    response = block.locator(".live-responses-table .response")
    expect(response.first).to_be_visible(timeout=HANG)
    return response.first, before


def main():
    base, key, wrong_key, screenshot = sys.argv[1:5]
    ops = operations(base)
    if "listPets" not in ops or "getPet" not in ops:
        fail(f"the document lacks listPets or getPet: {sorted(ops)}")

    requests, console_errors, page_errors = [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.on("request", lambda r: requests.append(r.url))
        page.on(
            "console",
            lambda m: console_errors.append((m.text, m.location.get("url", "")))
            if m.type == "error"
            else None,
        )
        page.on("pageerror", lambda e: page_errors.append(str(e)))
        page.goto(f"{base}/docs")

        # Every operation, by the id Swagger UI shows (displayOperationId).
        for op_id in ops:
            expect(operation_block(page, op_id)).to_have_count(1, timeout=HANG)
        shown = set(page.locator(".opblock-summary-operation-id").all_inner_texts())
        if shown != set(ops):
            fail(f"the page shows the operations {sorted(shown)}, the document has {sorted(ops)}")
        deprecated = sorted(i for i, op in ops.items() if op.get("deprecated"))
        if "getPet" not in deprecated:
            fail(f"the document no longer marks getPet deprecated: {deprecated}")
        for op_id in ops:
            marked = "opblock-deprecated" in (operation_block(page, op_id).get_attribute("class") or "")
            if marked != (op_id in deprecated):
                fail(f"{op_id}: shown {'as' if marked else 'not as'} deprecated")
        get_pet = operation_block(page, "getPet")
        get_pet.locator(".opblock-summary").click()
        expect(get_pet.get_by_text("Warning: Deprecated")).to_be_visible(timeout=HANG)
        get_pet.locator(".opblock-summary").click()
        expect(get_pet.get_by_text("Warning: Deprecated")).to_have_count(0, timeout=HANG)
        # The picture: the servers and Authorize bar at the top, then the
        # operations (the document's long description is above).
        page.locator(".scheme-container").evaluate("e => e.scrollIntoView({block: 'start'})")
        # Without the focus ring and hover marks of the clicks above.
        page.evaluate("document.activeElement && document.activeElement.blur()")
        page.mouse.move(0, 0)
        page.screenshot(path=screenshot)

        # "Try it out" of listPets, with the key, then a wrong one.
        authorize(page, key)
        list_pets = operation_block(page, "listPets")
        list_pets.locator(".opblock-summary").click()
        list_pets.locator("button.try-out__btn").click()
        response, _ = execute(page, list_pets)
        status = response.locator(".response-col_status").inner_text().strip()
        if status != "200":
            fail(f"listPets with the key: status {status}: {response.inner_text()}")
        headers = response.locator(".response-col_description").inner_text().lower()
        for name in ("ratelimit-policy", "ratelimit:", "x-ratelimit-remaining"):
            if name not in headers:
                fail(f"listPets with the key: no {name} header shown: {headers}")

        authorize(page, wrong_key)
        list_pets.locator("button.execute").click()
        status_cell = list_pets.locator(".live-responses-table .response .response-col_status")
        expect(status_cell.first).to_have_text("401", timeout=HANG)
        body = list_pets.locator(".live-responses-table .response .response-col_description").inner_text()
        for part in ('"code": "unauthorized"', '"status": 401', '"message":'):
            if part not in body:
                fail(f"listPets with a wrong key: {part} not in the body shown: {body}")
        browser.close()

    if page_errors:
        fail(f"the page threw: {page_errors}")
    # The browser notes every 4xx in the console; the 401 asked for is
    # the one expected, anything else fails.
    expected_401 = [
        e
        for e in console_errors
        if e[0].startswith("Failed to load resource: the server responded with a status of 401")
        and e[1].startswith(f"{base}/v1/pets")
    ]
    unexpected = [e for e in console_errors if e not in expected_401]
    if unexpected or len(expected_401) > 1:
        fail(f"console errors: {console_errors}")
    strays = [u for u in requests if not u.startswith(f"{base}/")]
    if strays:
        fail(f"requests outside {base}: {strays}")
    for wanted in ("/docs", "/v1/openapi.json", "/v1/pets"):
        if not any(u.startswith(base + wanted) for u in requests):
            fail(f"no request to {wanted} recorded: {requests}")
    print(
        f"docs-browser: {len(ops)} operations rendered, getPet deprecated, listPets 200 with "
        f"rate-limit headers and 401 with a wrong key; {len(requests)} requests, all to {base}; "
        f"no console error"
    )


if __name__ == "__main__":
    main()
