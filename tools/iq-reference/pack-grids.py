rows = open('grids.txt').read().split('\n')
def parse(i): 
    p = rows[i].split(); return p[0], [float(v) for v in p[1:]]
specs = [ # name, dims, levels, bits
 ('iq2xxs', 8, [8,25,43], 2), ('iq2xs', 8, [8,25,43], 2), ('iq2s', 8, [8,25,43], 2),
 ('iq3xxs', 4, [4,12,20,28,36,44,52,62], 3), ('iq3s', 4, [1,3,5,7,9,11,13,15], 3), ('iq1s', 8, [-1,0,1], 2)]
out = []
for i,(name,dims,levels,bits) in enumerate(specs):
    nm, vals = parse(i); assert nm == name
    if name == 'iq3xxs': vals = [v*2 for v in vals]
    n = len(vals)//dims
    codes = []
    for e in range(n):
        c = 0
        for j in range(dims):
            v = vals[e*dims+j]; k = levels.index(int(round(v))); assert abs(levels[k]-v) < 1e-6
            c |= k << (bits*j)
        codes.append(c)
    out.append((name, n, codes))
with open('packed.inc','w') as f:
    for name, n, codes in out:
        f.write('const uint16_t %s_packed[%d] = {\n' % (name, n))
        for k in range(0, n, 16):
            f.write('    ' + ', '.join('0x%04x' % c for c in codes[k:k+16]) + ',\n')
        f.write('};\n')
print([ (n, len(c)) for n,_,c in [(a,b,c) for a,b,c in out]])
