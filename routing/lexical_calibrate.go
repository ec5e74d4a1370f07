package routing

import "math"

// fitLogistic fits P(y=1|x) = σ(w·x + w₀) by Newton's method with a small
// L2 penalty (which also keeps separable data finite). x rows have a fixed
// width d; the result has d+1 entries, the intercept last.
func fitLogistic(x [][]float64, y []float64, l2 float64) []float64 {
	if len(x) == 0 {
		return nil
	}
	d := len(x[0]) + 1
	w := make([]float64, d)
	g := make([]float64, d)
	h := make([]float64, d*d)
	row := make([]float64, d)
	for range 50 {
		clear(g)
		clear(h)
		for i := range x {
			copy(row, x[i])
			row[d-1] = 1
			var s float64
			for j := range d {
				s += w[j] * row[j]
			}
			p := sigmoid(s)
			r := p * (1 - p)
			for j := range d {
				g[j] += (p - y[i]) * row[j]
				for k := range d {
					h[j*d+k] += r * row[j] * row[k]
				}
			}
		}
		for j := range d - 1 {
			g[j] += l2 * w[j]
			h[j*d+j] += l2
		}
		h[d*d-1] += 1e-9
		step, ok := solve(h, g, d)
		if !ok {
			break
		}
		var size float64
		for j := range d {
			w[j] -= step[j]
			size = max(size, math.Abs(step[j]))
		}
		if size < 1e-9 {
			break
		}
	}
	return w
}

func sigmoid(s float64) float64 { return 1 / (1 + math.Exp(-s)) }

// solve returns the solution of a·x = b for a d×d matrix (row-major) by
// Gaussian elimination with partial pivoting; a and b are not modified.
func solve(a, b []float64, d int) ([]float64, bool) {
	m := make([]float64, d*(d+1))
	for i := range d {
		copy(m[i*(d+1):], a[i*d:i*d+d])
		m[i*(d+1)+d] = b[i]
	}
	for c := range d {
		p := c
		for r := c + 1; r < d; r++ {
			if math.Abs(m[r*(d+1)+c]) > math.Abs(m[p*(d+1)+c]) {
				p = r
			}
		}
		if math.Abs(m[p*(d+1)+c]) < 1e-12 {
			return nil, false
		}
		if p != c {
			for k := range d + 1 {
				m[c*(d+1)+k], m[p*(d+1)+k] = m[p*(d+1)+k], m[c*(d+1)+k]
			}
		}
		for r := range d {
			if r == c {
				continue
			}
			f := m[r*(d+1)+c] / m[c*(d+1)+c]
			for k := c; k <= d; k++ {
				m[r*(d+1)+k] -= f * m[c*(d+1)+k]
			}
		}
	}
	x := make([]float64, d)
	for i := range d {
		x[i] = m[i*(d+1)+d] / m[i*(d+1)+i]
	}
	return x, true
}
