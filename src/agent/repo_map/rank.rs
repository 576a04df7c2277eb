//! The file graph and personalized PageRank over it (Aider's repo map
//! ranking, on our index).
//!
//! An edge runs from a file that references a name to each file defining
//! it, weighted by `sqrt(count)` (a hundred calls are not a hundred times
//! the relevance of one), split among the definers (a name defined in many
//! files says little about each, and past 5 definers is weighed ×0.1),
//! ×10 for names in the focus, ×0.1 for private (`_x`) and short (< 4
//! chars) names, ×0.01 for names of 1–2 chars. Self-edges are dropped: a
//! file using its own definitions says nothing about the rest.
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use crate::index::WorkspaceIndex;

use super::Focus;

const DAMPING: f64 = 0.85;
const MAX_ITERATIONS: usize = 30;
/// Converged when the L1 change of the rank vector is below this per file.
const TOLERANCE: f64 = 1e-9;
/// Personalization mass of each focus path; each focus identifier's mass
/// (split among its definers) is half that.
const PATH_MASS: f64 = 1.0;
const IDENT_MASS: f64 = 0.5;
/// A name defined in more files than this is generic; see `name_weight`.
const MANY_DEFINERS: usize = 5;

pub(super) struct Edge {
    pub to: usize,
    pub weight: f64,
    pub name: Arc<str>,
}

pub(super) struct Graph {
    /// Every indexed file, sorted by path.
    pub files: Vec<Arc<Path>>,
    /// Outgoing edges per file.
    pub edges: Vec<Vec<Edge>>,
    /// PageRank per file, summing to 1.
    pub rank: Vec<f64>,
}

impl Graph {
    pub fn build(index: &WorkspaceIndex, focus: &Focus) -> Graph {
        let files: Vec<Arc<Path>> = index.files().into_iter().map(|f| f.path).collect();
        let position: HashMap<&Path, usize> =
            files.iter().enumerate().map(|(i, p)| (&**p, i)).collect();
        let mut definers: HashMap<Arc<str>, Vec<usize>> = HashMap::new();
        let mut definers_of = |name: &Arc<str>| -> Vec<usize> {
            definers
                .entry(name.clone())
                .or_insert_with(|| {
                    let mut found: Vec<usize> = index
                        .definitions(name)
                        .iter()
                        .filter_map(|d| position.get(&*d.path).copied())
                        .collect();
                    found.sort_unstable();
                    found.dedup();
                    found
                })
                .clone()
        };
        let focused: std::collections::HashSet<&str> =
            focus.identifiers.iter().map(String::as_str).collect();

        let mut edges: Vec<Vec<Edge>> = Vec::with_capacity(files.len());
        for (from, path) in files.iter().enumerate() {
            let mut out = Vec::new();
            for (name, count) in index.reference_counts(path) {
                let to_files = definers_of(&name);
                if to_files.is_empty() {
                    continue;
                }
                let weight = name_weight(&name, focused.contains(&*name), to_files.len())
                    * f64::from(count).sqrt()
                    / to_files.len() as f64;
                out.extend(
                    to_files
                        .into_iter()
                        .filter(|&to| to != from)
                        .map(|to| Edge {
                            to,
                            weight,
                            name: name.clone(),
                        }),
                );
            }
            edges.push(out);
        }

        let mut personal = vec![0.0; files.len()];
        for p in &focus.paths {
            if let Some(&i) = position.get(p.as_path()) {
                personal[i] += PATH_MASS;
            }
        }
        for ident in &focus.identifiers {
            let found = definers_of(&Arc::from(ident.as_str()));
            for &i in &found {
                personal[i] += IDENT_MASS / found.len() as f64;
            }
        }
        let rank = pagerank(&edges, personal);
        Graph { files, edges, rank }
    }

    /// Files by rank, best first; ties by path.
    pub fn ranked_files(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.files.len()).collect();
        order.sort_by(|&a, &b| {
            self.rank[b]
                .total_cmp(&self.rank[a])
                .then_with(|| self.files[a].cmp(&self.files[b]))
        });
        order
    }

    /// The rank each (defining file, name) receives along its edges: how
    /// much of the graph's attention flows to that definition.
    pub fn definition_flow(&self) -> HashMap<(usize, Arc<str>), f64> {
        let mut flow: HashMap<(usize, Arc<str>), f64> = HashMap::new();
        for (from, out) in self.edges.iter().enumerate() {
            let total: f64 = out.iter().map(|e| e.weight).sum();
            if total <= 0.0 {
                continue;
            }
            for e in out {
                *flow.entry((e.to, e.name.clone())).or_insert(0.0) +=
                    self.rank[from] * e.weight / total;
            }
        }
        flow
    }
}

fn name_weight(name: &str, focused: bool, definers: usize) -> f64 {
    let mut weight = 1.0;
    // `new`, `Error`, `Future`: defined all over, so a reference to one
    // says little about which definition is meant.
    if definers > MANY_DEFINERS {
        weight *= 0.1;
    }
    if focused {
        weight *= 10.0;
    }
    if name.starts_with('_') {
        weight *= 0.1;
    }
    let len = name.chars().count();
    if len < 4 {
        weight *= 0.1;
    }
    // `T`, `E`, `i`: generic parameters and locals, almost never the point.
    if len <= 2 {
        weight *= 0.1;
    }
    weight
}

/// Personalized PageRank: with probability `1 - DAMPING`, and from files
/// with no outgoing edges, the walk jumps by `personal` (uniform when it
/// is all zero).
fn pagerank(edges: &[Vec<Edge>], mut personal: Vec<f64>) -> Vec<f64> {
    let n = edges.len();
    if n == 0 {
        return Vec::new();
    }
    let mass: f64 = personal.iter().sum();
    if mass > 0.0 {
        personal.iter_mut().for_each(|p| *p /= mass);
    } else {
        personal = vec![1.0 / n as f64; n];
    }
    let out_weight: Vec<f64> = edges
        .iter()
        .map(|out| out.iter().map(|e| e.weight).sum())
        .collect();
    let mut rank = vec![1.0 / n as f64; n];
    for _ in 0..MAX_ITERATIONS {
        let mut next = vec![0.0; n];
        let mut dangling = 0.0;
        for (from, out) in edges.iter().enumerate() {
            if out_weight[from] <= 0.0 {
                dangling += rank[from];
                continue;
            }
            let share = DAMPING * rank[from] / out_weight[from];
            for e in out {
                next[e.to] += share * e.weight;
            }
        }
        let jump = DAMPING * dangling + (1.0 - DAMPING);
        for (r, p) in next.iter_mut().zip(&personal) {
            *r += jump * p;
        }
        let change: f64 = next.iter().zip(&rank).map(|(a, b)| (a - b).abs()).sum();
        rank = next;
        if change < TOLERANCE * n as f64 {
            break;
        }
    }
    rank
}
