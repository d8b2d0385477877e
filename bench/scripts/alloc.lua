-- An allocation-heavy Lua script for the benchmark's memory workloads:
-- strings, tables and closures made in a loop and dropped, so that the
-- collector frees about as much as the loop allocates (Lua allocates and
-- frees through l_alloc, lauxlib.c: realloc and free). Only a small set
-- stays alive, overwritten round after round. Deterministic: the same
-- allocations every run (the bench fixes Lua's hash seed). arg[1] scales
-- it: the rounds, in thousands.
local n = tonumber(arg[1]) or 10

local live = {} -- the last 64 rounds' tables
local sum = 0
for i = 1, n * 1000 do
	-- Strings: formatted, repeated, concatenated (short ones are interned,
	-- long ones are not).
	local s = string.format("item-%d-%d", i, i % 97) .. string.rep("x", i % 61)
	-- Tables: an array part, a hash part, one that grows.
	local t = { i, s, name = s:upper(), tag = "t" .. (i % 13) }
	local grow = {}
	for k = 1, i % 17 do
		grow[k] = k * i
	end
	t.grow = grow
	-- A closure with upvalues, called once.
	local f = function(x)
		return x + #t.name + #grow
	end
	sum = sum + f(#s)
	live[i % 64 + 1] = t
end
print(sum, #live)
