-- A CPU-bound Lua script for the benchmark: recursion, table and string
-- work, sorting. Deterministic: the same output every run. arg[1] scales it.
local n = tonumber(arg[1]) or 20

local function fib(k)
	if k < 2 then return k end
	return fib(k - 1) + fib(k - 2)
end

local words = {}
for i = 1, n * 40 do
	words[i] = string.format("w%05d", (i * 7919) % 100003)
end
table.sort(words)

local counts = {}
for _, w in ipairs(words) do
	local key = w:sub(1, 3)
	counts[key] = (counts[key] or 0) + 1
end
local keys = 0
for _ in pairs(counts) do keys = keys + 1 end

print(fib(n), #words, keys, words[1], words[#words])
