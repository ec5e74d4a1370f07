package mcpserver

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addTool registers a tool whose arguments the SDK validates against
// tool.InputSchema and decodes into In, and whose result it does not
// validate against tool.OutputSchema: the SDK would decode every result
// into a generic value and walk the schema over it, which was about 40 %
// of a mesh_discover call's CPU. The results are our own types, encoded
// by encoding/json; the tests validate them against the schemas (as do
// the TypeScript and Python SDK clients of the interop suite, which check
// structuredContent against the advertised outputSchema), so the check
// is not needed at run time. The schema is still advertised: outputs
// adds it to every tools/list answer.
func addTool[In, Out any](srv *mcp.Server, outputs map[string]any, tool *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	t := *tool
	outputs[t.Name], t.OutputSchema = t.OutputSchema, nil
	mcp.AddTool(srv, &t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		return h(ctx, req, in)
	})
}

// advertiseOutputs is the receiving middleware that puts each tool's
// output schema (see addTool) into the answers to tools/list.
func advertiseOutputs(outputs map[string]any) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if lr, ok := res.(*mcp.ListToolsResult); ok && err == nil && method == "tools/list" {
				for i, tool := range lr.Tools {
					if s, ok := outputs[tool.Name]; ok && s != nil {
						c := *tool // the server's own tools are shared
						c.OutputSchema = s
						lr.Tools[i] = &c
					}
				}
			}
			return res, err
		}
	}
}
