package server_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wasmhooks/wasmhooks/server"
)

// chromiumPath is Debian's chromium (make deps installs it); the
// environment's WASMHOOKS_CHROMIUM names another.
const chromiumPath = "/usr/bin/chromium"

// browser is a headless Chromium driven over the DevTools protocol, and
// what its pages reported: uncaught exceptions and console or log errors
// (Content-Security-Policy violations among them).
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

// newBrowser starts Chromium for the test; without it the test is skipped,
// unless CI=true, where it fails.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath
	if p := os.Getenv("WASMHOOKS_CHROMIUM"); p != "" {
		path = p
	}
	if _, err := os.Stat(path); err != nil {
		if p, lerr := exec.LookPath("chromium"); lerr == nil && os.Getenv("WASMHOOKS_CHROMIUM") == "" {
			path = p
		} else if os.Getenv("CI") == "true" {
			t.Fatalf("chromium is required in CI (make deps installs it): %v", err)
		} else {
			t.Skipf("no chromium (%v): make deps installs it", err)
		}
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", "new"),
		chromedp.Flag("no-sandbox", true),
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	// Generous: two cores shared by several test runs.
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	b := &browser{ctx: ctx}
	// Start the browser, then read its console: uncaught exceptions and
	// errors, the browser's own log (CSP violations among them) included.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.errors = append(b.errors, m.String()+" ("+m.URL+")")
				b.mu.Unlock()
			}
		}
	}()
	return b
}

func (b *browser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		t.Fatalf("%s: %v (page errors: %v)", what, err, b.pageErrors())
	}
}

// get runs one action and returns its value.
func get[T any](t *testing.T, b *browser, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(b.ctx, a)
	if err != nil {
		t.Fatalf("%s: %v (page errors: %v)", what, err, b.pageErrors())
	}
	return v
}

// text is the text of the first element sel finds, once visible.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	return get(t, b, "text of "+sel, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
}

func (b *browser) pageErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// noPageErrors fails t if the page has had an error.
func (b *browser) noPageErrors(t *testing.T) {
	t.Helper()
	if errs := b.pageErrors(); len(errs) != 0 {
		t.Fatalf("page errors: %v", errs)
	}
}

// signIn opens the console and signs in with key.
func (b *browser) signIn(t *testing.T, base, key string) {
	t.Helper()
	b.do(t, "sign in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("key")),
		chromedp.SendKeys(chromedp.ID("key"), key),
		chromedp.Click(chromedp.ID("signin")),
		// Shown only once the server has answered /v1/me for the key.
		chromedp.WaitVisible(chromedp.ID("signout")),
	)
}

// TestConsoleApprove drives the approve flow in a real headless Chromium:
// an agent platform waits on a pending approval (Server-Sent Events); an
// operator signs in to the console, sees the approval in the inbox with what
// the hook proposed, clicks Approve, and the page shows the resumed run's
// verdict while the waiting client receives the resumed outcome; the run's
// page shows its trace and its audit records verified under the host key;
// the hooks and usage pages show the bound version and the tenant's credit.
// No page error, CSP violations included, happens along the way.
func TestConsoleApprove(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	a, id, w := streamWaiting(t, p, "r-console", map[string]any{"tool": "shell.exec", "arguments": map[string]any{"command": "ls -l /srv"}}, 120)
	a.grant(t, 42, "g")

	b := newBrowser(t)
	b.signIn(t, p.hs.URL, a.op.Key)
	card := `article.approval[data-id="` + id + `"]`
	b.do(t, "the inbox", chromedp.WaitVisible(chromedp.CSS(card)))
	if who := b.text(t, "#whoami"); !strings.Contains(who, "operator of acme") {
		t.Fatalf("whoami: %q", who)
	}
	text := b.text(t, card)
	for _, want := range []string{"approve-shell at tool.before", "shell needs a human", "r-console", "ls -l /srv", "Approve", "Deny"} {
		if !strings.Contains(text, want) {
			t.Fatalf("the approval's card lacks %q:\n%s", want, text)
		}
	}

	b.do(t, "approve",
		chromedp.Click(chromedp.CSS(card+" button.approve")),
		chromedp.WaitVisible(chromedp.CSS(card+".resolved .verdict")),
	)
	if status, verdict := b.text(t, "#status"), b.text(t, card+" .verdict"); status != "Approved "+id+": the resumed run's verdict is allow" || verdict != "allow" {
		t.Fatalf("after approve: status %q, verdict %q", status, verdict)
	}
	if g := w.result(t, "the waiting client", 30*time.Second); g.err != nil || g.out == nil || g.out.Verdict != "allow" || g.out.Run != "r-console" {
		t.Fatalf("the waiting client: %+v %v", g.out, g.err)
	}
	if list, err := a.op.Approvals(ctx, "acme", "pending"); err != nil || len(list) != 0 {
		t.Fatalf("still pending: %+v %v", list, err)
	}

	// Refreshed, the inbox is empty; the resolved list has it.
	b.do(t, "the inbox again",
		chromedp.Click(chromedp.ID("refresh")),
		chromedp.WaitVisible(chromedp.CSS("#approvals p.empty")),
	)
	if empty := b.text(t, "#approvals"); empty != "No pending approvals." {
		t.Fatalf("inbox: %q", empty)
	}
	resolved := `article.approval.resolved[data-id="` + id + `"]`
	b.do(t, "the resolved list",
		chromedp.Click(chromedp.ID("show-resolved")),
		chromedp.WaitVisible(chromedp.CSS(resolved)),
	)

	// The run: its trace, and its audit records verified.
	b.do(t, "the run",
		chromedp.Click(chromedp.CSS(resolved+" button.open-run")),
		chromedp.WaitVisible(chromedp.CSS("#run table")),
	)
	if trace := b.text(t, "#run table"); !strings.Contains(trace, "approve-shell") || !strings.Contains(trace, "approved") {
		t.Fatalf("trace:\n%s", trace)
	}
	records := b.text(t, "#run")
	verifications := get(t, b, "verifications", chromedp.Nodes(chromedp.CSSAll("#run .verification")))
	if len(verifications) < 2 || strings.Count(records, "verified (hash and MAC)") != len(verifications) || strings.Contains(records, "FAILED") {
		t.Fatalf("%d records:\n%s", len(verifications), records)
	}

	b.do(t, "hooks",
		chromedp.Click(chromedp.CSS(`#nav button[data-view="hooks"]`)),
		chromedp.WaitVisible(chromedp.CSS(`article.hook[data-name="policy"]`)),
	)
	if hooks := b.text(t, "#page-hooks"); !strings.Contains(hooks, "pubco/policy@1.0.0") || !strings.Contains(hooks, "no valid signature") || !strings.Contains(hooks, "Validation report") {
		t.Fatalf("hooks:\n%s", hooks)
	}
	b.do(t, "usage",
		chromedp.Click(chromedp.CSS(`#nav button[data-view="usage"]`)),
		chromedp.WaitVisible(chromedp.CSS("#page-usage table")),
	)
	if usage := b.text(t, "#page-usage table"); !strings.Contains(usage, "42") {
		t.Fatalf("usage:\n%s", usage)
	}
	b.noPageErrors(t)
}

// TestConsoleShowsMarkupAsText: an approval whose hook-written reason,
// user message and pending note, and whose user-written context, hold HTML
// and script is shown in the console as that text: no element is made of
// it and nothing of it runs. Then the page's Content-Security-Policy is
// seen in force: an inline handler injected by hand does not run, and the
// browser reports the violation.
func TestConsoleShowsMarkupAsText(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	a := newTenant(t, p, "acme", false)
	op, rt := a.op, a.rt
	pin := publishPolicy(t, a.pub)
	hostile := strings.Replace(string(chainConfig(pin)),
		`"decide": {"action": "ask", "reason": "shell needs a human"}`,
		`"decide": {"action": "ask", "reason": "<img src=x onerror=window.pwned=1>", "user_message": "<script>window.pwned=2</script>", "pending": {"note": "<b onmouseover=window.pwned=3>bold</b>"}}`, 1)
	if hostile == string(chainConfig(pin)) {
		t.Fatal("the configuration did not change")
	}
	a.bind(t, []byte(hostile))
	command := `<img src=x onerror="window.pwned=4"><svg onload="window.pwned=5"></svg>`
	out, err := rt.Run(ctx, "acme", "tool.before", map[string]any{"tool": "shell.exec", "arguments": map[string]any{"command": command}}, "r-xss")
	if err != nil || out.Approval == nil || out.Approval.Reason != "<img src=x onerror=window.pwned=1>" {
		t.Fatalf("%+v %v", out, err)
	}
	id := out.Approval.ID

	b := newBrowser(t)
	b.signIn(t, p.hs.URL, op.Key)
	card := `article.approval[data-id="` + id + `"]`
	b.do(t, "the inbox",
		chromedp.WaitVisible(chromedp.CSS(card)),
		chromedp.Sleep(300*time.Millisecond), // an onerror or onload would have fired by now
	)
	text := b.text(t, card)
	for _, want := range []string{"<img src=x onerror=window.pwned=1>", "<script>window.pwned=2</script>", "<b onmouseover=window.pwned=3>bold</b>", `<img src=x onerror=\"window.pwned=4\">`} {
		if !strings.Contains(text, want) {
			t.Fatalf("the card does not show %q as text:\n%s", want, text)
		}
	}
	counts := get(t, b, "counts", chromedp.Evaluate[map[string]int](`({img: document.querySelectorAll('img').length,
		svg: document.querySelectorAll('svg').length, b: document.querySelectorAll('b').length, script: document.scripts.length})`))
	pwned := get(t, b, "pwned", chromedp.Evaluate[bool](`window.pwned !== undefined`))
	if counts["img"] != 0 || counts["svg"] != 0 || counts["b"] != 0 || counts["script"] != 1 || pwned {
		t.Fatalf("markup became elements or ran: %v, pwned %v", counts, pwned)
	}
	b.noPageErrors(t)

	// The CSP itself: markup injected by hand (as a mistaken innerHTML
	// would) makes an element, but its inline handler is refused.
	b.do(t, "the CSP",
		chromedp.Evaluate[chromedp.Void](`window.violations = 0;
			document.addEventListener('securitypolicyviolation', () => { window.violations++; });
			document.body.insertAdjacentHTML('beforeend', '<img id="probe" src="data:," onerror="window.cspBroke=1" onload="window.cspBroke=1">');`),
		chromedp.Sleep(500*time.Millisecond),
	)
	probe := get(t, b, "the probe", chromedp.Evaluate[map[string]any](`({img: !!document.getElementById('probe'), broke: window.cspBroke === 1, violations: window.violations})`))
	if probe["img"] != true || probe["broke"] != false || probe["violations"].(float64) < 1 {
		t.Fatalf("the CSP is not in force: %v", probe)
	}
}

// TestConsoleDenyAndEdit: in the console, an operator denies one approval
// with a note and approves another with its arguments edited; the agent
// platform waiting on each (one by Server-Sent Events, one by long poll)
// receives the resumed outcome the page shows: blocked with the note, and
// allowed with the edited arguments.
func TestConsoleDenyAndEdit(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	a := newAsking(t, p)
	deny := a.pending(t, "r-deny", map[string]any{"tool": "shell.exec", "arguments": map[string]any{"command": "rm -rf /"}})
	edit := a.pending(t, "r-edit", map[string]any{"tool": "shell.exec", "arguments": map[string]any{"command": "cat /etc/shadow"}})

	denied, edited := waitStream(ctx, a.rt, deny, 120), waitPoll(ctx, a.rt, edit, 60)

	b := newBrowser(t)
	b.signIn(t, p.hs.URL, a.op.Key)
	denyCard, editCard := `article.approval[data-id="`+deny+`"]`, `article.approval[data-id="`+edit+`"]`
	b.do(t, "deny",
		chromedp.WaitVisible(chromedp.CSS(denyCard)),
		chromedp.WaitVisible(chromedp.CSS(editCard)),
		chromedp.SendKeys(chromedp.CSS(denyCard+" input.reason"), "not on production"),
		chromedp.Click(chromedp.CSS(denyCard+" button.deny")),
		chromedp.WaitVisible(chromedp.CSS(denyCard+".resolved .verdict")),
	)
	if status, verdict := b.text(t, "#status"), b.text(t, denyCard+" .verdict"); status != "Denied "+deny+": the resumed run's verdict is block" || verdict != "block" {
		t.Fatalf("after deny: status %q, verdict %q", status, verdict)
	}
	b.do(t, "edit",
		chromedp.Click(chromedp.CSS(editCard+" button.edit-open")),
		chromedp.WaitVisible(chromedp.CSS(editCard+" textarea")),
	)
	if draft := get(t, b, "the draft", chromedp.Value(chromedp.CSS(editCard+" textarea"))); !strings.Contains(draft, "cat /etc/shadow") {
		t.Fatalf("the edit's draft: %q", draft)
	}
	b.do(t, "edit",
		chromedp.SetValue(chromedp.CSS(editCard+" textarea"), `{"arguments": {"command": "cat /etc/hostname"}}`),
		chromedp.Click(chromedp.CSS(editCard+" button.edit-submit")),
		chromedp.WaitVisible(chromedp.CSS(editCard+".resolved .verdict")),
	)
	if status, shown := b.text(t, "#status"), b.text(t, editCard+" .result"); status != "Edited "+edit+": the resumed run's verdict is allow" || !strings.Contains(shown, "cat /etc/hostname") {
		t.Fatalf("after edit: status %q, shown %q", status, shown)
	}

	for name, w := range map[string]*waiting{"denied": denied, "edited": edited} {
		g := w.result(t, name+": the waiting client", 30*time.Second)
		if g.err != nil || g.out == nil {
			t.Fatalf("%s: %+v %v", name, g.out, g.err)
		}
		args, _ := g.out.Context["arguments"].(map[string]any)
		switch name {
		case "denied":
			if g.out.Verdict != "block" || g.out.Run != "r-deny" || g.out.Reason != "not on production" {
				t.Fatalf("denied: %s", g.out.Raw)
			}
		case "edited":
			if g.out.Verdict != "allow" || g.out.Run != "r-edit" || args["command"] != "cat /etc/hostname" {
				t.Fatalf("edited: %s", g.out.Raw)
			}
		}
	}
	b.noPageErrors(t)
}

// TestConsoleRoles: what each key sees. An admin key sees every tenant's
// credit and usage; a publisher key its versions with their validation
// reports and signatures; a runtime key no views; a key the server does not
// know is refused and the sign-in form comes back; signing out forgets the
// key.
func TestConsoleRoles(t *testing.T) {
	ctx := context.Background()
	p := newPlatform(t)
	for _, id := range []string{"acme", "globex"} {
		p.createTenant(t, id, id == "globex")
	}
	if _, err := p.admin.GrantCredit(ctx, "globex", 1234, "g"); err != nil {
		t.Fatal(err)
	}
	pub := p.key(t, server.RolePublisher, "pubco")
	publishPolicy(t, pub)
	rt := p.key(t, server.RoleRuntime, "acme")
	b := newBrowser(t)

	b.signIn(t, p.hs.URL, adminKey)
	b.do(t, "tenants", chromedp.WaitVisible(chromedp.CSS("#page-tenants table")))
	if tenants := b.text(t, "#page-tenants table"); !strings.Contains(tenants, "acme") || !strings.Contains(tenants, "globex\tyes\t1234") {
		t.Fatalf("tenants:\n%s", tenants)
	}
	b.do(t, "sign out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("key")),
		chromedp.WaitNotVisible(chromedp.ID("nav")), chromedp.WaitNotVisible(chromedp.ID("signout")))
	if key := get(t, b, "the stored key", chromedp.Evaluate[string](`sessionStorage.getItem('wasmhooks.key') || ''`)); key != "" {
		t.Fatalf("signed out, the key is still stored: %q", key)
	}

	b.signIn(t, p.hs.URL, pub.Key)
	b.do(t, "versions", chromedp.WaitVisible(chromedp.CSS(`#page-versions article.hook[data-name="policy"]`)))
	if v := b.text(t, "#page-versions"); !strings.Contains(v, "pubco/policy@1.0.0") || !strings.Contains(v, "Validation report") || !strings.Contains(v, "no valid signature") {
		t.Fatalf("versions:\n%s", v)
	}
	b.do(t, "sign out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("key")))

	b.signIn(t, p.hs.URL, rt.Key)
	b.do(t, "runtime", chromedp.WaitVisible(chromedp.ID("no-views")))
	if v := b.text(t, "#view"); !strings.Contains(v, "A runtime key has no console views") {
		t.Fatalf("runtime:\n%s", v)
	}
	b.do(t, "sign out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("key")))

	b.do(t, "a bad key",
		chromedp.SendKeys(chromedp.ID("key"), "whk_not-a-key"),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.CSS("#status.error")),
		chromedp.WaitVisible(chromedp.ID("key")),
	)
	if st := b.text(t, "#status"); !strings.Contains(st, "unauthenticated") {
		t.Fatalf("bad key: %q", st)
	}
	if errs := b.pageErrors(); len(errs) != 1 || !strings.Contains(errs[0], "401") {
		t.Fatalf("page errors (want the one 401): %v", errs)
	}
}
