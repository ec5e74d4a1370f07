// Package synthagents makes synthetic agent registries and queries for load
// tools and benchmarks (cmd/meshload, the routing benchmarks at scale).
package synthagents

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/agentmesh/agentmesh/registry"
)

// The synthetic registry: agents that read like the ones people register —
// an English description of what the agent does, for whom and with which
// system, and 3–6 capability keywords — drawn from a fixed vocabulary of
// business and engineering domains. Domains are picked with a Zipf
// distribution (a few domains hold most agents, as in real registries), and
// so are the nouns inside a domain, so common query words match hundreds of
// agents out of 10,000 and rare ones a handful: the index sees both long and
// short posting lists.
//
// Everything is a pure function of (seed, index): agent i is the same on
// every run and on every worker, whatever order agents are generated in, so
// `-mode seed` is idempotent and the queries of `-mode discover` match the
// seeded registry.

// domain is one topic of the vocabulary.
type domain struct {
	name    string
	nouns   []string // what agents of the domain act on, most common first
	systems []string // products they act through
	users   []string // who they serve
}

var domains = []domain{
	{"finance", []string{"invoices", "budgets", "expenses", "payments", "ledger", "forecasts", "receipts", "accounts", "reconciliation", "cost centers"}, []string{"SAP", "NetSuite", "QuickBooks"}, []string{"finance teams", "controllers", "department heads"}},
	{"support", []string{"tickets", "customers", "escalations", "refunds", "complaints", "chats", "macros", "satisfaction surveys", "knowledge articles", "returns"}, []string{"Zendesk", "Intercom", "Freshdesk"}, []string{"support agents", "customers", "the help desk"}},
	{"engineering", []string{"pull requests", "code", "tests", "builds", "repositories", "bugs", "dependencies", "releases", "branches", "linters"}, []string{"GitHub", "GitLab", "Jenkins"}, []string{"developers", "engineering teams", "reviewers"}},
	{"sales", []string{"leads", "opportunities", "quotes", "deals", "pipelines", "prospects", "territories", "renewals", "contracts", "accounts"}, []string{"Salesforce", "HubSpot", "Pipedrive"}, []string{"sales reps", "account managers", "sales leaders"}},
	{"hr", []string{"employees", "onboarding", "leave", "benefits", "payroll", "performance reviews", "org charts", "policies", "offboarding", "timesheets"}, []string{"Workday", "BambooHR", "Rippling"}, []string{"employees", "managers", "people teams"}},
	{"it", []string{"passwords", "accounts", "laptops", "licenses", "access requests", "vpn", "devices", "printers", "software", "outages"}, []string{"Okta", "Active Directory", "Jamf"}, []string{"employees", "IT staff", "new hires"}},
	{"security", []string{"vulnerabilities", "alerts", "incidents", "secrets", "certificates", "audit logs", "phishing", "firewall rules", "permissions", "threats"}, []string{"Splunk", "CrowdStrike", "Vault"}, []string{"security analysts", "the SOC", "auditors"}},
	{"devops", []string{"deployments", "clusters", "containers", "pipelines", "metrics", "logs", "incidents", "rollbacks", "dashboards", "on-call schedules"}, []string{"Kubernetes", "Terraform", "Datadog"}, []string{"SREs", "platform teams", "on-call engineers"}},
	{"data", []string{"tables", "queries", "datasets", "schemas", "dashboards", "reports", "pipelines", "metrics", "warehouses", "data quality"}, []string{"Snowflake", "BigQuery", "dbt"}, []string{"analysts", "data engineers", "business users"}},
	{"marketing", []string{"campaigns", "emails", "newsletters", "audiences", "ads", "landing pages", "social posts", "brand guidelines", "events", "webinars"}, []string{"Mailchimp", "Marketo", "Google Ads"}, []string{"marketers", "content teams", "growth teams"}},
	{"legal", []string{"contracts", "clauses", "ndas", "policies", "regulations", "trademarks", "patents", "disputes", "privacy requests", "terms"}, []string{"DocuSign", "Ironclad", "iManage"}, []string{"lawyers", "the legal team", "compliance officers"}},
	{"procurement", []string{"purchase orders", "vendors", "suppliers", "requisitions", "bids", "catalogs", "approvals", "spend", "contracts", "invoices"}, []string{"Coupa", "Ariba", "Jaggaer"}, []string{"buyers", "procurement teams", "requesters"}},
	{"travel", []string{"flights", "hotels", "itineraries", "trips", "visas", "rental cars", "travel policy", "bookings", "expenses", "loyalty points"}, []string{"Concur", "Navan", "Amadeus"}, []string{"travellers", "executive assistants", "travel managers"}},
	{"logistics", []string{"shipments", "orders", "warehouses", "inventory", "carriers", "deliveries", "tracking numbers", "routes", "pallets", "customs forms"}, []string{"ShipStation", "Flexport", "Oracle WMS"}, []string{"warehouse staff", "dispatchers", "operations managers"}},
	{"ecommerce", []string{"products", "orders", "carts", "prices", "discounts", "reviews", "catalogs", "checkouts", "stock levels", "promotions"}, []string{"Shopify", "Magento", "Stripe"}, []string{"shoppers", "merchants", "store managers"}},
	{"healthcare", []string{"appointments", "patients", "prescriptions", "lab results", "referrals", "claims", "medical records", "symptoms", "insurance", "vaccinations"}, []string{"Epic", "Cerner", "athenahealth"}, []string{"clinicians", "patients", "front desk staff"}},
	{"documents", []string{"documents", "files", "pdfs", "spreadsheets", "presentations", "templates", "folders", "signatures", "versions", "scans"}, []string{"Google Drive", "SharePoint", "Dropbox"}, []string{"knowledge workers", "teams", "everyone"}},
	{"meetings", []string{"meetings", "calendars", "agendas", "notes", "transcripts", "action items", "rooms", "invitations", "recordings", "follow-ups"}, []string{"Zoom", "Google Calendar", "Microsoft Teams"}, []string{"managers", "executive assistants", "project teams"}},
	{"projects", []string{"tasks", "projects", "milestones", "sprints", "roadmaps", "issues", "epics", "deadlines", "status updates", "risks"}, []string{"Jira", "Asana", "Linear"}, []string{"project managers", "product teams", "stakeholders"}},
	{"research", []string{"papers", "citations", "experiments", "datasets", "literature reviews", "abstracts", "grants", "patents", "benchmarks", "surveys"}, []string{"arXiv", "PubMed", "Semantic Scholar"}, []string{"researchers", "students", "analysts"}},
	{"translation", []string{"translations", "glossaries", "subtitles", "localization files", "languages", "terminology", "manuals", "strings", "websites", "documents"}, []string{"DeepL", "Crowdin", "Phrase"}, []string{"localization teams", "writers", "global teams"}},
	{"content", []string{"articles", "blog posts", "summaries", "headlines", "drafts", "style guides", "images", "captions", "videos", "podcasts"}, []string{"WordPress", "Contentful", "Canva"}, []string{"editors", "writers", "content teams"}},
	{"real-estate", []string{"properties", "leases", "tenants", "listings", "maintenance requests", "inspections", "rent", "floor plans", "valuations", "mortgages"}, []string{"Yardi", "AppFolio", "Zillow"}, []string{"landlords", "property managers", "tenants"}},
	{"manufacturing", []string{"work orders", "machines", "production lines", "defects", "quality checks", "spare parts", "maintenance", "bills of materials", "shifts", "sensors"}, []string{"Siemens MES", "SAP PM", "Maximo"}, []string{"plant managers", "technicians", "quality engineers"}},
	{"energy", []string{"meters", "consumption", "outages", "tariffs", "solar panels", "grid load", "emissions", "batteries", "readings", "bills"}, []string{"OSIsoft PI", "Itron", "Enphase"}, []string{"utilities", "facility managers", "households"}},
	{"education", []string{"courses", "students", "assignments", "grades", "quizzes", "lessons", "enrollments", "transcripts", "syllabi", "certificates"}, []string{"Canvas", "Moodle", "Coursera"}, []string{"teachers", "students", "administrators"}},
	{"insurance", []string{"claims", "policies", "quotes", "premiums", "underwriting", "renewals", "fraud", "adjusters", "coverage", "damages"}, []string{"Guidewire", "Duck Creek", "Applied Epic"}, []string{"agents", "policyholders", "underwriters"}},
	{"banking", []string{"transactions", "accounts", "loans", "cards", "transfers", "statements", "fraud alerts", "credit scores", "mortgages", "kyc checks"}, []string{"Plaid", "Temenos", "FIS"}, []string{"customers", "bankers", "risk teams"}},
	{"compliance", []string{"controls", "audits", "evidence", "policies", "risks", "findings", "certifications", "vendor assessments", "training records", "exceptions"}, []string{"Vanta", "Drata", "OneTrust"}, []string{"compliance officers", "auditors", "security teams"}},
	{"facilities", []string{"desks", "rooms", "visitors", "badges", "parking", "cleaning", "repairs", "floor plans", "deliveries", "occupancy"}, []string{"Envoy", "Robin", "ServiceNow"}, []string{"office managers", "employees", "visitors"}},
	{"recruiting", []string{"candidates", "job postings", "interviews", "resumes", "offers", "referrals", "scorecards", "pipelines", "sourcing", "background checks"}, []string{"Greenhouse", "Lever", "LinkedIn"}, []string{"recruiters", "hiring managers", "candidates"}},
	{"weather", []string{"forecasts", "alerts", "temperatures", "storms", "air quality", "rainfall", "wind", "pollen", "uv index", "climate data"}, []string{"NOAA", "OpenWeather", "Tomorrow.io"}, []string{"planners", "field teams", "travellers"}},
	{"maps", []string{"addresses", "routes", "locations", "directions", "places", "geocodes", "traffic", "distances", "territories", "stores"}, []string{"Google Maps", "Mapbox", "OpenStreetMap"}, []string{"drivers", "field teams", "customers"}},
	{"media", []string{"images", "videos", "audio", "thumbnails", "transcriptions", "subtitles", "podcasts", "photos", "music", "streams"}, []string{"YouTube", "Vimeo", "Frame.io"}, []string{"creators", "editors", "media teams"}},
	{"analytics", []string{"reports", "kpis", "dashboards", "funnels", "cohorts", "forecasts", "anomalies", "experiments", "revenue", "churn"}, []string{"Looker", "Tableau", "Amplitude"}, []string{"executives", "analysts", "product managers"}},
	{"tax", []string{"tax returns", "vat", "filings", "deductions", "withholding", "receipts", "tax rates", "audits", "1099 forms", "sales tax"}, []string{"Avalara", "Vertex", "TurboTax"}, []string{"accountants", "finance teams", "freelancers"}},
}

// verbs an agent's description opens with (third person) and the base forms
// used in queries.
var verbs = []struct{ s, base string }{
	{"answers questions about", "answer"}, {"tracks", "track"}, {"reviews", "review"}, {"summarizes", "summarize"},
	{"reconciles", "reconcile"}, {"schedules", "schedule"}, {"books", "book"}, {"approves", "approve"},
	{"monitors", "monitor"}, {"searches", "search"}, {"analyzes", "analyze"}, {"drafts", "draft"},
	{"classifies", "classify"}, {"routes", "route"}, {"updates", "update"}, {"exports", "export"},
	{"forecasts", "forecast"}, {"audits", "audit"}, {"translates", "translate"}, {"validates", "validate"},
	{"escalates", "escalate"}, {"creates", "create"}, {"cancels", "cancel"}, {"syncs", "sync"},
	{"extracts data from", "extract"}, {"flags problems in", "flag"}, {"reports on", "report"}, {"manages", "manage"},
}

var qualifiers = []string{
	"overdue", "open", "pending", "monthly", "quarterly", "weekly", "daily", "urgent", "new", "failed",
	"duplicate", "regional", "internal", "external", "customer", "team", "late", "recurring", "draft", "archived",
}

// capabilityActions make capability keywords out of nouns ("invoice-lookup").
var capabilityActions = []string{
	"lookup", "search", "report", "review", "sync", "export", "triage", "scheduling", "analysis",
	"approval", "forecast", "alerting", "booking", "summary", "tracking", "audit", "routing", "validation",
}

// Generator makes agents and queries for one seed.
type Generator struct {
	seed uint64
}

// New returns the generator of seed.
func New(seed uint64) *Generator { return &Generator{seed: seed} }

// rng returns the random source of item i of stream (agents, queries).
func (g *Generator) rng(stream, i uint64) *rand.Rand {
	return rand.New(rand.NewPCG(g.seed^stream*0x9e3779b97f4a7c15, i))
}

const (
	streamAgents   = 1
	streamQueries  = 2
	streamExamples = 3
)

// zipf picks an index in [0, n) with a Zipf(s=1.1, v=2) distribution: index
// 0 is the most likely.
func zipf(r *rand.Rand, n int) int {
	return int(rand.NewZipf(r, 1.1, 2, uint64(n-1)).Uint64())
}

// Agent is the registration body of an agent (POST /v1/agents,
// mesh_register).
type Agent struct {
	Name         string            `json:"name"`
	DisplayName  string            `json:"displayName,omitempty"`
	Description  string            `json:"description"`
	Capabilities []string          `json:"capabilities"`
	Endpoint     string            `json:"endpoint"`
	Protocol     string            `json:"protocol,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Examples     []string          `json:"examples,omitempty"`
}

// Agent returns synthetic agent i, with examples example utterances (see
// [Generator.Examples]). Its name is prefix-<domain>-<noun>-<i>.
func (g *Generator) Agent(prefix string, i, examples int) Agent {
	r := g.rng(streamAgents, uint64(i))
	d := &domains[zipf(r, len(domains))]
	noun := func() string { return pickNoun(r, d) }
	main := noun()
	var b strings.Builder
	v := verbs[r.IntN(len(verbs))].s
	b.WriteString(strings.ToUpper(v[:1]) + v[1:])
	fmt.Fprintf(&b, " %s %s and %s for %s", qualifiers[r.IntN(len(qualifiers))], main, noun(), d.users[r.IntN(len(d.users))])
	fmt.Fprintf(&b, " in %s.", d.systems[r.IntN(len(d.systems))])
	if r.IntN(3) > 0 {
		fmt.Fprintf(&b, " It can also %s %s, %s and %s", verbs[r.IntN(len(verbs))].base, noun(), noun(), noun())
		if r.IntN(2) == 0 {
			fmt.Fprintf(&b, ", and %s %s when they are %s", verbs[r.IntN(len(verbs))].base, noun(), qualifiers[r.IntN(len(qualifiers))])
		}
		b.WriteByte('.')
	}
	if r.IntN(2) == 0 {
		fmt.Fprintf(&b, " Use it when you need %s %s or a %s of %s.", qualifiers[r.IntN(len(qualifiers))], noun(),
			capabilityActions[r.IntN(len(capabilityActions))], noun())
	}

	caps := make([]string, 0, 6)
	seen := map[string]bool{}
	for n := 3 + r.IntN(4); len(caps) < n; {
		c := slug(singular(noun())) + "-" + capabilityActions[r.IntN(len(capabilityActions))]
		if !seen[c] {
			seen[c] = true
			caps = append(caps, c)
		}
	}
	name := fmt.Sprintf("%s%s-%s-%06d", prefix, d.name, slug(singular(main)), i)
	return Agent{
		Examples:     g.Examples(i, examples),
		Name:         name,
		DisplayName:  strings.ToUpper(d.name[:1]) + d.name[1:] + " " + singular(main) + " agent",
		Description:  b.String(),
		Capabilities: caps,
		Endpoint:     "https://" + strings.ToLower(name) + ".agents.example.com/task",
		Protocol:     "http",
		Labels:       map[string]string{"team": d.name},
	}
}

// pickNoun picks a noun of d, or now and then of another domain.
func pickNoun(r *rand.Rand, d *domain) string {
	if r.IntN(10) < 8 {
		return d.nouns[zipf(r, len(d.nouns))]
	}
	o := &domains[r.IntN(len(domains))] // a neighbouring topic
	return o.nouns[r.IntN(len(o.nouns))]
}

// Examples returns n example utterances of agent i: requests a user would
// type for it, about its main noun or others of its domain. The first k of
// Examples(i, n) are Examples(i, k), so utterances past an agent's
// examples are held-out messages for it.
func (g *Generator) Examples(i, n int) []string {
	if n <= 0 {
		return nil
	}
	r := g.rng(streamAgents, uint64(i))
	d := &domains[zipf(r, len(domains))]
	main := pickNoun(r, d)
	r = g.rng(streamExamples, uint64(i))
	out := make([]string, n)
	for j := range out {
		other := pickNoun(r, d)
		verb := verbs[r.IntN(len(verbs))].base
		q := qualifiers[r.IntN(len(qualifiers))]
		sys := d.systems[r.IntN(len(d.systems))]
		switch r.IntN(5) {
		case 0:
			out[j] = fmt.Sprintf("%s the %s %s", verb, q, main)
		case 1:
			out[j] = fmt.Sprintf("can you %s %s in %s", verb, main, sys)
		case 2:
			out[j] = fmt.Sprintf("I need the %s %s for %s", q, main, d.users[r.IntN(len(d.users))])
		case 3:
			out[j] = fmt.Sprintf("show me %s and %s from %s", main, other, sys)
		default:
			out[j] = fmt.Sprintf("please %s my %s %s", verb, q, other)
		}
	}
	return out
}

// Query returns synthetic query i: 2–4 words a user would type, mostly
// nouns of one domain with a verb, a qualifier or a system.
func (g *Generator) Query(i int) string {
	r := g.rng(streamQueries, uint64(i))
	d := &domains[zipf(r, len(domains))]
	words := make([]string, 0, 4)
	n := 2 + r.IntN(3)
	switch r.IntN(4) {
	case 0:
		words = append(words, verbs[r.IntN(len(verbs))].base)
	case 1:
		words = append(words, qualifiers[r.IntN(len(qualifiers))])
	}
	add := func(phrase string) {
		for _, w := range strings.Fields(strings.ToLower(phrase)) {
			if !slices.Contains(words, w) {
				words = append(words, w)
			}
		}
	}
	for len(words) < n {
		add(d.nouns[zipf(r, len(d.nouns))])
		if len(words) < n && r.IntN(4) == 0 {
			add(d.systems[r.IntN(len(d.systems))])
		}
	}
	if len(words) > n {
		words = words[:n]
	}
	return strings.Join(words, " ")
}

// singular is a rough English singular, for names and capabilities.
func singular(s string) string {
	switch {
	case strings.HasSuffix(s, "ies"):
		return s[:len(s)-3] + "y"
	case strings.HasSuffix(s, "sses"), strings.HasSuffix(s, "ches"), strings.HasSuffix(s, "shes"), strings.HasSuffix(s, "xes"):
		return s[:len(s)-2]
	case strings.HasSuffix(s, "ss"), strings.HasSuffix(s, "us"), strings.HasSuffix(s, "is"):
		return s
	case strings.HasSuffix(s, "s"):
		return s[:len(s)-1]
	}
	return s
}

// slug makes s a name fragment: lower case, runs of anything but letters
// and digits as one hyphen.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(c)
			dash = false
		} else {
			dash = true
		}
	}
	return b.String()
}

// Registry returns a as the registry's agent record, normalised.
func (a Agent) Registry() registry.Agent {
	ra := registry.Agent{
		Name:         a.Name,
		DisplayName:  a.DisplayName,
		Description:  a.Description,
		Capabilities: slices.Clone(a.Capabilities),
		Endpoint:     a.Endpoint,
		Protocol:     registry.Protocol(a.Protocol),
		Labels:       maps.Clone(a.Labels),
		Examples:     slices.Clone(a.Examples),
	}
	ra.Normalize()
	return ra
}
