-- A smoke run of `torchlint lsp` against Neovim's built-in LSP client (headless; not a test).
-- Run: PROJECT=/path/with/train.py TORCHLINT=/path/to/.venv/bin/torchlint nvim --headless --clean -c "luafile bench/nvim_smoke.lua"
-- It opens $PROJECT/train.py, prints the diagnostics, the code actions on line 9, applies the fix-all
-- (resolving it, as Neovim's own code-action UI does), prints the fixed lines, a hover, and the
-- diagnostics after the edit. Tried with Neovim 0.7.2 from Debian bookworm's packages.
local root = os.getenv("PROJECT")
local id = vim.lsp.start_client({
  name = "torchlint",
  cmd = { os.getenv("TORCHLINT") or "torchlint", "lsp" },
  root_dir = root,
  init_options = { unsafeFixes = false },
})
vim.cmd("edit " .. root .. "/train.py")
local buf = vim.api.nvim_get_current_buf()
vim.bo[buf].filetype = "python"
vim.lsp.buf_attach_client(buf, id)
local ok = vim.wait(15000, function() return #vim.diagnostic.get(buf) > 0 end, 50)
print("diagnostics received: " .. tostring(ok))
for _, d in ipairs(vim.diagnostic.get(buf)) do
  print(string.format("%d:%d-%d:%d %s %s", d.lnum, d.col, d.end_lnum, d.end_col, d.code or d.user_data and d.user_data.lsp.code or "?", d.message))
end
local client = vim.lsp.get_client_by_id(id)
local params = { textDocument = { uri = vim.uri_from_bufnr(buf) },
  range = { start = { line = 8, character = 20 }, ["end"] = { line = 8, character = 20 } },
  context = { diagnostics = {} } }
local result = vim.lsp.buf_request_sync(buf, "textDocument/codeAction", params, 10000)
for _, r in pairs(result or {}) do
  for _, action in ipairs(r.result or {}) do print("action: " .. action.title .. " [" .. (action.kind or "") .. "]") end
end
params.context.only = { "source.fixAll.torchlint" }
result = vim.lsp.buf_request_sync(buf, "textDocument/codeAction", params, 10000)
for _, r in pairs(result or {}) do
  for _, action in ipairs(r.result or {}) do
    if action.edit == nil then
      action = vim.lsp.buf_request_sync(buf, "codeAction/resolve", action, 10000)[id].result
      print("resolved the fix-all")
    end
    vim.lsp.util.apply_workspace_edit(action.edit, "utf-16")
  end
end
print("after fix-all:")
for i, line in ipairs(vim.api.nvim_buf_get_lines(buf, 8, 14, false)) do print("  " .. line) end
local hover = vim.lsp.buf_request_sync(buf, "textDocument/hover", { textDocument = { uri = vim.uri_from_bufnr(buf) }, position = { line = 9, character = 16 } }, 10000)
for _, r in pairs(hover or {}) do print("hover: " .. vim.split(r.result.contents.value, "\n")[1]) end
vim.wait(1500, function() return false end, 50)
print("diagnostics after the edit:")
for _, d in ipairs(vim.diagnostic.get(buf)) do print(string.format("  %d:%d %s", d.lnum, d.col, d.message:sub(1, 60))) end
vim.lsp.stop_client(id)
vim.wait(2000, function() return vim.lsp.get_client_by_id(id) == nil end, 50)
vim.cmd("qa!")
