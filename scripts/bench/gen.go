package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// Generated snapshots: a retailer's catalog of n products as a CSV of 13
// typical retail columns (~200 bytes a row), and the next day's snapshot with
// 2% of the products updated, 1% deleted and 1% inserted. Everything derives
// from the seed, so a run is reproducible.

var csvHeader = "product_id,title,brand,price,currency,availability,category,gtin,color,size,image_url,description,updated\n"

var (
	genBrands     = []string{"Acme", "Globex", "Initech", "Umbrella", "Stark", "Wayne & Co", "Soylent", "Hooli"}
	genCategories = []string{"Apparel > Shirts", "Apparel > Shoes", "Home > Kitchen", "Electronics > Audio", "Toys > Games", "Garden"}
	genColors     = []string{"red", "blue", "black", "white", "green", "navy", "grey"}
	genSizes      = []string{"XS", "S", "M", "L", "XL", "42", "10.5"}
	genAvail      = []string{"in stock", "out of stock", "preorder"}
	genWords      = []string{"soft", "cotton", "durable", "light", "premium", "classic", "modern", "slim", "waterproof", "breathable", "everyday", "organic"}
)

// product is one generated product: its id number and a version (an update
// bumps it, which changes price and availability).
type product struct {
	num     uint64
	version uint64
	idBytes int // 0: the id is SKU-<num, 10 digits>; else that many random letters and digits
}

// idChars are the characters of random ids, in byte order.
const idChars = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// appendID appends p's product_id.
func appendID(b []byte, p product) []byte {
	if p.idBytes == 0 {
		b = append(b, "SKU-"...)
		return fmt.Appendf(b, "%010d", p.num)
	}
	rng := rand.New(rand.NewPCG(p.num, 0x1d))
	for i := 0; i < p.idBytes; i++ {
		b = append(b, idChars[rng.IntN(len(idChars))])
	}
	return b
}

// sortByID sorts products by product_id (a no-op for SKU ids, which are in
// number order already).
func sortByID(products []product) {
	if len(products) == 0 || products[0].idBytes == 0 {
		return
	}
	type keyed struct {
		key [16]byte // the id's first bytes: random ids differ there
		p   product
	}
	ks := make([]keyed, len(products))
	var buf []byte
	for i, p := range products {
		buf = appendID(buf[:0], p)
		copy(ks[i].key[:], buf)
		ks[i].p = p
	}
	var ba, bb []byte
	slices.SortFunc(ks, func(a, b keyed) int {
		if c := bytes.Compare(a.key[:], b.key[:]); c != 0 {
			return c
		}
		ba, bb = appendID(ba[:0], a.p), appendID(bb[:0], b.p)
		return bytes.Compare(ba, bb)
	})
	for i := range ks {
		products[i] = ks[i].p
	}
}

// snapshotCSV is a CSV snapshot of products, header first.
func snapshotCSV(products []product) []byte {
	var b bytes.Buffer
	b.WriteString(csvHeader)
	var line []byte
	for _, pr := range products {
		line = appendRow(line[:0], pr)
		b.Write(line)
	}
	return b.Bytes()
}

// appendRow appends the CSV line of p.
func appendRow(b []byte, p product) []byte {
	rng := rand.New(rand.NewPCG(p.num, 0x5eed))
	vr := rand.New(rand.NewPCG(p.num, p.version))
	b = appendID(b, p)
	b = append(b, ',')
	brand := genBrands[rng.IntN(len(genBrands))]
	b = append(b, brand...)
	b = append(b, ' ')
	b = append(b, genWords[rng.IntN(len(genWords))]...)
	b = append(b, ' ')
	b = append(b, genWords[rng.IntN(len(genWords))]...)
	b = append(b, " tee,"...)
	b = append(b, brand...)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(vr.IntN(300)), 10)
	b = append(b, '.')
	b = fmt.Appendf(b, "%02d", vr.IntN(100))
	b = append(b, ",USD,"...)
	b = append(b, genAvail[vr.IntN(len(genAvail))]...)
	b = append(b, ',')
	b = append(b, genCategories[rng.IntN(len(genCategories))]...)
	b = append(b, ',')
	b = fmt.Appendf(b, "%013d", rng.Int64N(1e13))
	b = append(b, ',')
	b = append(b, genColors[rng.IntN(len(genColors))]...)
	b = append(b, ',')
	b = append(b, genSizes[rng.IntN(len(genSizes))]...)
	b = append(b, ",https://img.example.com/p/"...)
	b = fmt.Appendf(b, "%010d", p.num)
	b = append(b, ".jpg,"...)
	if p.num%10 == 0 { // some quoted fields, with commas and quotes
		b = append(b, `"The ""`...)
		b = append(b, genWords[rng.IntN(len(genWords))]...)
		b = append(b, `"" one, in `...)
		b = append(b, genColors[rng.IntN(len(genColors))]...)
		b = append(b, '"')
	} else {
		for i := 0; i < 3; i++ {
			if i > 0 {
				b = append(b, ' ')
			}
			b = append(b, genWords[rng.IntN(len(genWords))]...)
		}
	}
	b = append(b, ",2025-"...)
	b = fmt.Appendf(b, "%02d-%02dT10:%02d:00Z", 1+rng.IntN(12), 1+rng.IntN(28), vr.IntN(60))
	return append(b, '\n')
}

// pair is a generated pair of snapshots, sorted by product_id.
type pair struct {
	old, new []product
	updated  int
	deleted  int
	inserted int
}

// genPair makes the products of the old and the new snapshot.
func genPair(n int, seed uint64) pair {
	rng := rand.New(rand.NewPCG(seed, 1))
	extra := n / 100 // inserted in the new snapshot
	nums := make([]uint64, 0, n+extra)
	var num uint64 = 1_000_000
	for len(nums) < n+extra {
		num += 1 + uint64(rng.IntN(150))
		nums = append(nums, num)
	}
	inserted := map[uint64]bool{}
	for len(inserted) < extra {
		inserted[nums[rng.IntN(len(nums))]] = true
	}
	var p pair
	for _, num := range nums {
		if inserted[num] {
			p.new = append(p.new, product{num: num, version: 1})
			p.inserted++
			continue
		}
		p.old = append(p.old, product{num: num, version: 1})
		switch r := rng.IntN(100); {
		case r < 1:
			p.deleted++ // not in the new snapshot
		case r < 3:
			p.new = append(p.new, product{num: num, version: 2})
			p.updated++
		default:
			p.new = append(p.new, product{num: num, version: 1})
		}
	}
	return p
}

// writeCSV writes products as a CSV file and returns its size.
func writeCSV(path string, products []product) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString(csvHeader)
	var line []byte
	for _, p := range products {
		line = appendRow(line[:0], p)
		w.Write(line)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return 0, err
	}
	return st.Size(), f.Close()
}

// shuffled returns a copy of products in a seeded random order.
func shuffled(products []product, seed uint64) []product {
	out := slices.Clone(products)
	rng := rand.New(rand.NewPCG(seed, 2))
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// files of a generated pair.
type pairFiles struct {
	dir                           string
	oldSorted, newSorted, newShuf string
	oldBytes, newBytes            int64
	pair                          pair
	reused                        bool // written by an earlier run with the same parameters
}

// makePairFiles generates the pair and writes the old snapshot sorted, the
// new one sorted and shuffled; idBytes > 0 gives random ids of that length.
func makePairFiles(dir string, n int, seed uint64, idBytes int) (*pairFiles, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p := genPair(n, seed)
	if idBytes > 0 {
		for _, list := range [][]product{p.old, p.new} {
			for i := range list {
				list[i].idBytes = idBytes
			}
			sortByID(list)
		}
	}
	pf := &pairFiles{dir: dir, pair: p,
		oldSorted: filepath.Join(dir, "old.csv"), newSorted: filepath.Join(dir, "new.csv"),
		newShuf: filepath.Join(dir, "new-shuffled.csv")}
	// Files written by an earlier run in the same directory with the same
	// parameters are reused (the 10M-row files take minutes to write).
	marker := filepath.Join(dir, "generated")
	params := fmt.Sprintf("rows=%d seed=%d id-bytes=%d\n", n, seed, idBytes)
	if b, err := os.ReadFile(marker); err == nil && string(b) == params {
		old, err1 := os.Stat(pf.oldSorted)
		nw, err2 := os.Stat(pf.newSorted)
		_, err3 := os.Stat(pf.newShuf)
		if err1 == nil && err2 == nil && err3 == nil {
			pf.oldBytes, pf.newBytes, pf.reused = old.Size(), nw.Size(), true
			return pf, nil
		}
	}
	os.Remove(marker)
	var err error
	if pf.oldBytes, err = writeCSV(pf.oldSorted, pf.pair.old); err != nil {
		return nil, err
	}
	if pf.newBytes, err = writeCSV(pf.newSorted, pf.pair.new); err != nil {
		return nil, err
	}
	if _, err = writeCSV(pf.newShuf, shuffled(pf.pair.new, seed)); err != nil {
		return nil, err
	}
	return pf, os.WriteFile(marker, []byte(params), 0o644)
}
