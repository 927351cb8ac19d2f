//! The kernels of the papers, each declared once with [`kernel!`], and
//! three that are not Laplace derivatives (no far field): the regularised
//! and the singular Stokeslet, and the screened Coulomb (Yukawa) kernel.
//!
//! Conventions (see also `shared/KERNELS.md` of the project): target `i`,
//! source `j`, `d = x_i - x_j`, `r = |d|`. Every kernel adds exactly zero
//! for a source on the target (r = 0), so the self-interaction drops out of
//! every sum; the `kernel!` macro checks this.

use crate::kernel;

kernel! {
    /// Gravity with Plummer softening (nyland2007), G = 1:
    /// `phi_i = -sum_j m_j / sqrt(r^2 + eps^2)`,
    /// `acc_i = sum_j m_j (x_j - x_i) / (r^2 + eps^2)^(3/2)`.
    /// The self term (r = 0) is excluded, also from `phi`.
    pub kernel Gravity {
        param eps;
        source m;
        output phi;
        output acc: vec3;
        require eps >= 0.0;
        strength m;
        far_field laplace {
            phi = -potential;
            acc = gradient;
        }
        let inv = select(r2 > 0.0, rsqrt(r2 + eps * eps), 0.0);
        phi -= m * inv;
        acc -= m * inv * inv * inv * d;
    }
}

kernel! {
    /// Coulomb potential and field, without the 1/(4 pi eps0) factor:
    /// `phi_i = sum_{j != i} q_j / r`, `e_i = -grad phi_i = sum_j q_j d / r^3`.
    /// (FMM3D's lfmm3d returns q / (4 pi r): divide by 4 pi to compare.)
    pub kernel Coulomb {
        source q;
        output phi;
        output e: vec3;
        strength q;
        far_field laplace {
            phi = potential;
            e = -gradient;
        }
        let inv = select(r2 > 0.0, rsqrt(r2), 0.0);
        phi += q * inv;
        e += q * inv * inv * inv * d;
    }
}

kernel! {
    /// Biot-Savart law with a Gaussian core (yokota2009 eqs 3-6, yokota2012
    /// eqs 1-2): `u_i = 1/(4 pi) sum_j g(r / sigma_j) (alpha_j x d) / r^3`,
    /// `g(rho) = erf(rho / sqrt 2) - sqrt(2 / pi) rho exp(-rho^2 / 2)`.
    /// `alpha` is the vortex strength (vorticity times volume), `sigma` the
    /// core radius of the source.
    pub kernel BiotSavart {
        source alpha: vec3;
        source sigma;
        output u: vec3;
        require sigma > 0.0;
        strength alpha;
        far_field laplace {
            u = curl / (4.0 * PI);
        }
        let rho = r / sigma;
        let g = erf(rho * sqrt(0.5)) - sqrt(2.0 / PI) * rho * exp(-0.5 * rho * rho);
        let inv_r = select(r2 > 0.0, 1.0 / r, 0.0);
        let k = g * inv_r * inv_r * inv_r / (4.0 * PI);
        u += k * cross(alpha, d);
    }
}

kernel! {
    /// Vortex stretching, classical scheme (yokota2009 eq 9):
    /// `s_i = (alpha_i . grad) u(x_i)
    ///      = sum_j [ K(r) (alpha_j x alpha_i) + K'(r)/r (alpha_i . d) (alpha_j x d) ]`,
    /// `K(r) = g(r / sigma_j) / (4 pi r^3)`,
    /// `K'(r)/r = (g'(r) / r^4 - 3 g / r^5) / (4 pi)`,
    /// `g'(r) = sqrt(2 / pi) r^2 / sigma^3 exp(-r^2 / (2 sigma^2))`.
    pub kernel Stretching {
        source alpha: vec3;
        source sigma;
        target alpha_i: vec3;
        output s: vec3;
        require sigma > 0.0;
        strength alpha;
        far_field laplace {
            s = stretching(alpha_i) / (4.0 * PI);
        }
        let rho = r / sigma;
        let e = exp(-0.5 * rho * rho);
        let g = erf(rho * sqrt(0.5)) - sqrt(2.0 / PI) * rho * e;
        let inv_r = select(r2 > 0.0, 1.0 / r, 0.0);
        let inv_r2 = inv_r * inv_r;
        let g_r3 = g * inv_r2 * inv_r;
        let k = g_r3 / (4.0 * PI);
        let dk = (sqrt(2.0 / PI) * e / (sigma * sigma * sigma) - 3.0 * g_r3) * inv_r2 / (4.0 * PI);
        s += k * cross(alpha, alpha_i) + dk * dot(alpha_i, d) * cross(alpha, d);
    }
}

kernel! {
    /// Velocity and stretching in one pass (yokota2009 section 4.2): the two
    /// share `g`, the exponential and the powers of `1/r`, so the fused
    /// kernel costs little more than stretching alone. Same conventions as
    /// [`BiotSavart`] and [`Stretching`].
    pub kernel VelocityStretching {
        source alpha: vec3;
        source sigma;
        target alpha_i: vec3;
        output u: vec3;
        output s: vec3;
        require sigma > 0.0;
        strength alpha;
        far_field laplace {
            u = curl / (4.0 * PI);
            s = stretching(alpha_i) / (4.0 * PI);
        }
        let rho = r / sigma;
        let e = exp(-0.5 * rho * rho);
        let g = erf(rho * sqrt(0.5)) - sqrt(2.0 / PI) * rho * e;
        let inv_r = select(r2 > 0.0, 1.0 / r, 0.0);
        let inv_r2 = inv_r * inv_r;
        let g_r3 = g * inv_r2 * inv_r;
        let k = g_r3 / (4.0 * PI);
        let dk = (sqrt(2.0 / PI) * e / (sigma * sigma * sigma) - 3.0 * g_r3) * inv_r2 / (4.0 * PI);
        let ad = cross(alpha, d);
        u += k * ad;
        s += k * cross(alpha, alpha_i) + dk * dot(alpha_i, d) * ad;
    }
}

kernel! {
    /// Singular Biot-Savart law with polynomial smoothing (hu2011 eqs 5,
    /// 13-14): `v(y) = sum_i q_i x (y - x_i) / |y - x_i|^3 K(|y - x_i|, eps)`,
    /// `K(d, eps) = d^2 / eps^2` for `d < eps`, 1 otherwise (equal at `d = eps`; `eps = 0` is the singular law). No 1/(4 pi):
    /// hu2011 folds it into the strengths `q`. Sources (vortex elements) and
    /// targets (dust particles) are usually different sets.
    pub kernel HuBiotSavart {
        param eps;
        source q: vec3;
        output v: vec3;
        require eps >= 0.0;
        strength q;
        far_field laplace {
            v = curl;
        }
        let inv_r = select(r2 > 0.0, rsqrt(r2), 0.0);
        let smoothing = if r2 < eps * eps { r2 / (eps * eps) } else { 1.0 };
        v += smoothing * inv_r * inv_r * inv_r * cross(q, d);
    }
}

kernel! {
    /// Regularised Stokeslet (Cortez, Fauci & Medovikov 2005, blob
    /// `phi_eps(r) = 15 eps^4 / (8 pi (r^2 + eps^2)^(7/2))`): the velocity
    /// of point forces `f` in a fluid of viscosity `mu`,
    /// `u_i = 1/(8 pi mu) sum_j [ f_j (r^2 + 2 eps^2) + (f_j . d) d ] / (r^2 + eps^2)^(3/2)`.
    /// `eps >= 0` is the blob size (`eps = 0`: the singular Stokeslet, as
    /// [`StokesletSingular`] times `1 / mu`); `mu > 0`.
    /// The self term is excluded like every r = 0 pair: a blob's own
    /// velocity `f_i / (4 pi mu eps)` (the kernel at r = 0) is not added;
    /// where the targets are the sources, add `f_i / (4 pi mu eps)` to
    /// `u_i` to include it (for `eps > 0`).
    /// No far field is declared (not a Laplace derivative).
    pub kernel Stokeslet {
        param eps;
        param mu;
        source f: vec3;
        output u: vec3;
        require eps >= 0.0;
        require mu > 0.0;
        strength f;
        let e2 = eps * eps;
        let inv = select(r2 > 0.0, rsqrt(r2 + e2), 0.0);
        let k = inv * inv * inv / (8.0 * PI * mu);
        u += k * ((r2 + 2.0 * e2) * f + dot(f, d) * d);
    }
}

kernel! {
    /// Singular Stokeslet (Oseen tensor) with viscosity 1, in FMM3D's
    /// convention (stfmm3d from FMM3D 2.1.0 on, fmm3dpy 2.1.0: "standard
    /// definitions", `G_ij = (delta_ij / r + d_i d_j / r^3) / (8 pi)`):
    /// `u_i = 1/(8 pi) sum_j [ f_j / r + (f_j . d) d / r^3 ]`,
    /// which is stfmm3d's `pottarg` (or `pot`, self term omitted there
    /// too) for `stoklet = f`. FMM3D up to 2.0.0 defined
    /// `G_ij = (delta_ij / r + d_i d_j / r^3) / 2`, 4 pi times larger:
    /// multiply `u` by 4 pi to compare with those versions. For viscosity
    /// `mu`, divide `u` by `mu` (or use [`Stokeslet`] with `eps = 0`).
    /// No far field is declared (not a Laplace derivative).
    pub kernel StokesletSingular {
        source f: vec3;
        output u: vec3;
        strength f;
        let inv = select(r2 > 0.0, rsqrt(r2), 0.0);
        u += inv / (8.0 * PI) * (f + dot(f, d) * inv * inv * d);
    }
}

kernel! {
    /// Screened Coulomb (Yukawa, modified Helmholtz) potential and field,
    /// screening length `1 / lambda`:
    /// `phi_i = sum_j q_j exp(-lambda r) / r`,
    /// `e_i = -grad phi_i = sum_j q_j exp(-lambda r) (1 + lambda r) d / r^3`.
    /// `lambda >= 0` (`lambda = 0` is [`Coulomb`]). No 1/(4 pi): exafmm-t's
    /// modified Helmholtz kernel (`wavek = lambda`) is
    /// `exp(-lambda r) / (4 pi r)` and returns `+grad` of it, so
    /// `phi = 4 pi phi_exafmm` and `e = -4 pi grad_exafmm`.
    /// No far field is declared (not a Laplace derivative).
    pub kernel Yukawa {
        param lambda;
        source q;
        output phi;
        output e: vec3;
        require lambda >= 0.0;
        strength q;
        let inv_r = select(r2 > 0.0, rsqrt(r2), 0.0);
        // lambda r as lambda r2 / r: one rsqrt, no sqrt (0 at r = 0).
        let lr = lambda * r2 * inv_r;
        let screened = q * exp(-lr) * inv_r;
        phi += screened;
        e += screened * (1.0 + lr) * inv_r * inv_r * d;
    }
}
