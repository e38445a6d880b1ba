"""The web page in headless Chromium (Debian's `chromium`, driven by Playwright), as a person
uses it, at 1280×800 and at 390×844 (a phone), light and dark. Prints one `NAME ok` line per
step; any failure raises. Screenshots go to the folder given last. The Rust test
(tests/api/web.rs, the_page_works_in_headless_chromium) queued the mock model's replies in the
order the steps below ask for them, after 30 runs of user `bob` (for paging).

Usage: page.py BASE_URL ADMIN_KEY RELOAD_ANSWER SCREENSHOT_DIR
"""
import os
import sys

from playwright.sync_api import expect, sync_playwright

from pagekit import axe, DESKTOP, launch, send, TIMEOUT

BASE, KEY, RELOAD_ANSWER, SHOTS = sys.argv[1:5]
PHONE = {"width": 390, "height": 844}


def shot(page, name, full=False):
    page.screenshot(path=os.path.join(SHOTS, name), full_page=full)


def last_answer(page):
    return page.locator(".message.assistant").last


def wait_finished(page):
    expect(last_answer(page).locator(".footer")).to_be_visible(timeout=TIMEOUT)


def stored(page, conversation_id):
    response = page.request.get(
        f"{BASE}/api/ada/conversations/{conversation_id}",
        headers={"Authorization": f"Bearer {KEY}"},
    )
    return response.status, (response.json() if response.ok else None)


def current_conversation(page):
    return page.evaluate("sessionStorage.getItem('agentd.conversation')")


def no_sideways_scroll(page, where):
    width = page.evaluate("document.documentElement.scrollWidth")
    viewport = page.viewport_size["width"]
    assert width <= viewport, f"{where}: the page is {width} px wide at {viewport} px"
    wider = page.evaluate(
        """() => Array.from(document.querySelectorAll('body *')).filter(e => {
            const r = e.getBoundingClientRect();
            return r.width > 0 && r.right > window.innerWidth + 1
              && !e.closest('.table-scroll, .code-block pre, .table-wrap, .sidebar');
          }).map(e => e.tagName + '.' + e.className).slice(0, 5)"""
    )
    assert not wider, f"{where}: elements past the right edge: {wider}"


def composer_pinned(page, where):
    box = page.locator("#composer").bounding_box()
    height = page.viewport_size["height"]
    assert abs(box["y"] + box["height"] - height) <= 1, f"{where}: composer ends at {box['y'] + box['height']}, not {height}"


def open_identity(page):
    """The key panel (open by itself when the server asked for a key)."""
    if not page.locator("#key").is_visible():
        page.click("#identity summary")
    expect(page.locator("#key")).to_be_visible()


def connect(page, user="ada"):
    page.goto(BASE + "/")
    expect(page.locator("#notice")).to_contain_text("401", timeout=TIMEOUT)
    open_identity(page)
    page.fill("#key", KEY)
    page.fill("#user", user)
    page.click("#connect")
    expect(page.locator("#agent option[value=chat]")).to_have_count(1, timeout=TIMEOUT)


def watch_console(page, errors):
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)


def desktop(browser, errors):
    page = browser.new_page(viewport=DESKTOP)
    watch_console(page, errors)
    page.goto(BASE + "/")

    # No key on a server that needs one, then a wrong key: the page says so in words.
    expect(page.locator("#notice")).to_contain_text("needs an API key", timeout=TIMEOUT)
    open_identity(page)
    page.fill("#key", "wrong-key")
    page.click("#connect")
    expect(page.locator("#notice")).to_contain_text("401", timeout=TIMEOUT)
    expect(page.locator("#notice")).to_contain_text("API key")
    errors.clear()  # the refused request is the browser's own console line
    print("401 ok")

    page.fill("#key", KEY)
    page.fill("#user", "ada")
    page.click("#connect")
    expect(page.locator("#agent option[value=chat]")).to_have_count(1, timeout=TIMEOUT)
    expect(page.locator("#thread-agent")).to_have_text("chat")

    # Markdown renders while it streams: the heading is a heading before the answer ends, and
    # the same node stays (no re-render flicker) until it does.
    send(page, "Show me markdown")
    heading = last_answer(page).locator(".text h2")
    expect(heading).to_have_text("Plan", timeout=TIMEOUT)
    assert last_answer(page).locator(".footer").count() == 0, "the answer had already ended"
    first_node = heading.element_handle()
    wait_finished(page)
    assert page.evaluate("h => h.isConnected", first_node), "the heading was rebuilt"
    answer = last_answer(page)
    expect(answer.locator(".text li")).to_have_count(2)
    expect(answer.locator(".text table td").first).to_have_text("1")
    expect(answer.locator(".code-block .code-lang")).to_have_text("python")
    assert answer.locator(".code-block .hljs-built_in, .code-block .hljs-string").count() >= 1, "code is highlighted"
    expect(answer.locator(".text strong")).to_have_text("world")
    expect(answer.locator(".footer")).to_contain_text("tokens")
    expect(answer.locator(".footer")).to_contain_text("$")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=BASE)
    answer.locator(".copy-code").click()
    expect(answer.locator(".copy-code")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()").strip() == "print('hi')"
    shot(page, "desktop-markdown.png")
    print("markdown ok")

    # A tool call (a new chat with the agent that has tools): collapsible, with arguments,
    # result and duration.
    page.click("#new-chat")
    page.select_option("#agent", "tooly")
    expect(page.locator("#thread-agent")).to_have_text("tooly")
    send(page, "Echo ping")
    wait_finished(page)
    tool = last_answer(page).locator("details.tool")
    expect(tool.locator("summary")).to_contain_text("test__echo")
    expect(tool.locator("summary")).to_contain_text("ms")
    tool.locator("summary").click()
    expect(tool.locator("pre.arguments")).to_contain_text('"text": "ping"')
    expect(tool.locator("pre.output")).to_have_text("ping")
    shot(page, "desktop-tool.png")
    print("tool ok")

    # Markup a model writes shows as text and runs nothing.
    send(page, "Say something nasty")
    wait_finished(page)
    answer = last_answer(page).locator(".text")
    expect(answer).to_contain_text("<script>window.__xss=2</script>", timeout=TIMEOUT)
    expect(answer).to_contain_text("<img src=x")
    assert page.evaluate("window.__xss") is None, "script from a model answer ran"
    assert last_answer(page).locator("img, script").count() == 0
    print("xss ok")

    # Thinking is collapsible and says how long it took.
    send(page, "Think first")
    wait_finished(page)
    thinking = last_answer(page).locator("details.thinking")
    expect(thinking.locator("summary")).to_contain_text("Thinking")
    thinking.locator("summary").click()
    expect(thinking).to_contain_text("step by step")
    print("thinking ok")

    # An approval, decided with the keyboard after editing the arguments.
    page.click("#new-chat")
    page.select_option("#agent", "approver")
    send(page, "Echo with approval")
    approval = last_answer(page).locator(".approval")
    expect(approval.locator(".approve")).to_be_focused(timeout=TIMEOUT)
    approval.locator("textarea").fill('{"text": "edited"}')
    approval.locator(".approve").focus()
    shot(page, "desktop-approval.png")
    page.keyboard.press("Enter")
    expect(approval.locator(".approval-status")).to_contain_text("Approved", timeout=TIMEOUT)
    wait_finished(page)
    tool = last_answer(page).locator("details.tool")
    tool.locator("summary").click()
    expect(tool.locator("pre.output")).to_have_text("edited")
    print("approval ok")

    # A sub-agent's progress shows live, then done.
    page.click("#new-chat")
    page.select_option("#agent", "lead")
    send(page, "Ask the helper")
    wait_finished(page)
    progress = last_answer(page).locator(".agent-progress")
    expect(progress).to_contain_text("helper")
    expect(progress.locator(".agent-status")).to_have_text("done")
    expect(last_answer(page).locator(".text")).to_contain_text("The helper found 42.")
    shot(page, "desktop-subagent.png")
    print("subagent ok")

    # Reload mid-answer: the answer finishes, each word once.
    page.click("#new-chat")
    page.select_option("#agent", "chat")
    send(page, "Count slowly")
    expect(last_answer(page).locator(".text")).to_contain_text("word2", timeout=TIMEOUT)
    page.reload()
    wait_finished(page)
    text = last_answer(page).locator(".text").inner_text()
    assert text.strip() == RELOAD_ANSWER.strip(), f"after reload: {text!r}"
    print("reload ok")

    # Stop with the keyboard: Tab from the message box reaches Stop.
    send(page, "Count very slowly")
    expect(last_answer(page).locator(".text")).to_contain_text("slow1", timeout=TIMEOUT)
    page.focus("#prompt")
    page.keyboard.press("Tab")
    expect(page.locator("#stop")).to_be_focused()
    page.keyboard.press("Enter")
    expect(last_answer(page)).to_contain_text("Stopped.", timeout=TIMEOUT)
    expect(page.locator("#stop")).to_be_hidden()
    print("stop ok")

    # Regenerate the stopped answer: the stored history is rewound to its question.
    conversation = current_conversation(page)
    last_answer(page).locator(".regenerate").click()
    wait_finished(page)
    expect(last_answer(page).locator(".text")).to_have_text("Regenerated answer.")
    status, detail = stored(page, conversation)
    contents = [m["content"] for m in detail["messages"]]
    assert contents == ["Count slowly", RELOAD_ANSWER, "Count very slowly", "Regenerated answer."], contents
    print("regenerate ok")

    # Edit the first message: everything after it goes, the edited text is answered.
    first = page.locator(".message.user").first
    first.locator(".edit").click()
    first.locator("textarea").fill("Count quickly")
    first.locator(".save").click()
    wait_finished(page)
    expect(page.locator(".message")).to_have_count(2)
    expect(last_answer(page).locator(".text")).to_have_text("Edited answer.")
    status, detail = stored(page, conversation)
    contents = [(m["role"], m["content"]) for m in detail["messages"]]
    assert contents == [("user", "Count quickly"), ("assistant", "Edited answer.")], contents
    print("edit ok")

    # Conversations: titled after the first message, renamed, searched, deleted with Undo.
    items = page.locator(".conversation")
    expect(items.first.locator(".title")).to_have_text("Count slowly")
    items.first.locator(".rename").click()
    page.locator(".rename-form input").fill("Counting game")
    page.keyboard.press("Enter")
    expect(items.first.locator(".title")).to_have_text("Counting game", timeout=TIMEOUT)
    expect(page.locator("#thread-title")).to_have_text("Counting game")
    assert stored(page, conversation)[1]["title"] == "Counting game"
    page.fill("#search", "counting")
    expect(items).to_have_count(1, timeout=TIMEOUT)
    page.fill("#search", "no such title")
    expect(page.locator("#no-conversations")).to_be_visible(timeout=TIMEOUT)
    page.fill("#search", "")
    expect(items).to_have_count(5, timeout=TIMEOUT)
    doomed = page.locator(".conversation", has_text="Echo ping")
    doomed_id = doomed.get_attribute("data-id")
    doomed.locator(".delete").click()
    expect(page.locator("#toast")).to_contain_text("Deleted")
    expect(items).to_have_count(4)
    page.locator("#toast .undo").click()
    expect(items).to_have_count(5, timeout=TIMEOUT)
    assert stored(page, doomed_id)[0] == 200
    page.locator(".conversation", has_text="Echo ping").locator(".delete").click()
    expect(page.locator("#toast")).to_be_hidden(timeout=TIMEOUT)
    page.wait_for_timeout(500)
    assert stored(page, doomed_id)[0] == 404, "deleted once the Undo ran out"
    print("conversations ok")

    # Switch conversation with the keyboard.
    target = page.locator(".conversation", has_text="Show me markdown").locator(".open")
    target.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#thread-title")).to_have_text("Show me markdown", timeout=TIMEOUT)
    expect(last_answer(page).locator(".text h2")).to_have_text("Plan")
    expect(target).to_have_attribute("aria-current", "true")
    # A stored answer shows what its run used, and links to it.
    expect(last_answer(page).locator(".footer")).to_contain_text("16 tokens", timeout=TIMEOUT)
    expect(last_answer(page).locator(".footer .run-link")).to_be_visible()
    axe(page, "desktop chat")
    shot(page, "desktop-chat.png")
    print("keyboard ok")

    # The runs console: paging, filters, a run's detail beside the list, links both ways.
    page.click("#tab-runs")
    rows = page.locator("#run-table tbody tr")
    expect(rows).to_have_count(25, timeout=TIMEOUT)
    expect(page.locator("#runs-next")).to_be_enabled()
    page.click("#runs-next")
    expect(page.locator("#runs-page")).to_have_text("Page 2")
    expect(page.locator("#runs-prev")).to_be_enabled()
    page.click("#runs-prev")
    expect(page.locator("#runs-page")).to_have_text("Page 1")
    page.select_option("#filter-status", "cancelled")
    page.click("#run-filters button[type=submit]")
    expect(rows).to_have_count(1, timeout=TIMEOUT)
    expect(rows.first).to_contain_text("cancelled")
    page.select_option("#filter-status", "")
    page.click("#run-filters button[type=submit]")
    expect(rows).to_have_count(25, timeout=TIMEOUT)
    link = rows.first.locator(".open-run")
    link.focus()
    page.keyboard.press("Enter")
    detail = page.locator("#run-detail")
    expect(detail).to_be_visible()
    expect(page.locator("#timeline-events")).to_contain_text("Run finished", timeout=TIMEOUT)
    expect(page.locator("#run-facts")).to_contain_text("Tokens")
    expect(page.locator("#run-accounting")).to_contain_text("llm")
    box, table = detail.bounding_box(), page.locator(".run-list").bounding_box()
    assert box["x"] >= table["x"] + table["width"] - 1, "the detail opens beside the list"
    axe(page, "desktop runs")
    shot(page, "desktop-runs.png")
    page.locator("#run-facts .conversation-link").click()
    expect(page.locator("#chat-view")).to_be_visible()
    expect(page.locator("#thread-title")).to_have_text("Counting game", timeout=TIMEOUT)
    page.click("#thread-runs")
    expect(rows).to_have_count(4, timeout=TIMEOUT)
    print("runs ok")

    # The Usage tab: the runs above, summed per day and per agent, as a chart and a table.
    page.click("#tab-usage")
    expect(page.locator("#usage-view")).to_be_visible()
    usage_rows = page.locator("#usage-table tbody tr")
    expect(usage_rows).to_have_count(1, timeout=TIMEOUT)
    expect(page.locator("#usage-chart svg rect")).to_have_count(1)
    page.select_option("#usage-group", "agent")
    chat_row = page.locator("#usage-table tbody tr", has=page.get_by_role("cell", name="chat", exact=True))
    expect(chat_row).to_have_count(1, timeout=TIMEOUT)
    runs_cell = chat_row.locator("td").nth(1)
    assert int(runs_cell.inner_text().replace(",", "")) >= 25, runs_cell.inner_text()
    page.select_option("#usage-measure", "cost_usd")
    expect(page.locator("#usage-chart svg .usage-bar-value").first).to_contain_text("$")
    axe(page, "desktop usage")
    shot(page, "desktop-usage.png")
    print("usage ok")

    # Dark mode follows the system.
    page.emulate_media(color_scheme="dark")
    page.click("#tab-chat")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(18, 21, 28)", background
    axe(page, "desktop dark")
    shot(page, "desktop-dark.png")
    page.emulate_media(color_scheme="light")
    print("dark ok")
    assert not errors, f"console errors: {errors}"
    page.close()


def phone(browser, errors):
    context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
    page = context.new_page()
    watch_console(page, errors)
    connect(page)
    expect(page.locator("#conversations .conversation").first).to_be_attached(timeout=TIMEOUT)
    errors.clear()  # the first, keyless request's 401
    header = page.locator(".bar").bounding_box()
    assert header["height"] < 64, f"the header is {header['height']} px tall on a phone"
    expect(page.locator("#sidebar")).to_be_hidden()
    composer_pinned(page, "phone, empty")
    no_sideways_scroll(page, "phone chat")
    shot(page, "phone-empty.png")

    page.click("#sidebar-toggle")
    expect(page.locator("#sidebar")).to_be_visible()
    no_sideways_scroll(page, "phone sidebar")
    axe(page, "phone sidebar")
    shot(page, "phone-sidebar.png")
    page.locator(".conversation", has_text="Show me markdown").locator(".open").click()
    expect(page.locator("#sidebar")).to_be_hidden()
    expect(last_answer(page).locator(".text table")).to_be_visible(timeout=TIMEOUT)

    send(page, "A wide answer please")
    wait_finished(page)
    composer_pinned(page, "phone, after answers")
    no_sideways_scroll(page, "phone answer")
    axe(page, "phone chat")
    shot(page, "phone-chat.png")

    page.click("#tab-runs")
    expect(page.locator("#run-table tbody tr").first).to_be_visible(timeout=TIMEOUT)
    no_sideways_scroll(page, "phone runs")
    shot(page, "phone-runs.png")
    page.locator("#run-table tbody tr .open-run").first.click()
    expect(page.locator("#timeline-events")).to_contain_text("Run finished", timeout=TIMEOUT)
    no_sideways_scroll(page, "phone run detail")
    axe(page, "phone run detail")
    shot(page, "phone-run-detail.png")
    page.click("#run-detail-close")
    expect(page.locator("#run-detail")).to_be_hidden()

    page.emulate_media(color_scheme="dark")
    page.click("#tab-chat")
    shot(page, "phone-dark.png")
    print("phone ok")
    context.close()


def main():
    with sync_playwright() as p:
        browser = launch(p)
        errors = []
        desktop(browser, errors)
        phone(browser, errors)
        icon = browser.new_page().request.get(BASE + "/ui/favicon.svg")
        assert icon.status == 200 and icon.headers["content-type"] == "image/svg+xml"
        assert not errors, f"console errors: {errors}"
        print("console ok")
        browser.close()


main()
